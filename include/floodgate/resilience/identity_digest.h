// The SHA-256 identity digest: the only form in which a scoped rate limit (issue 15) stores a
// request-derived identity (a tenant id, a token, a client address). Raw identities never
// reach a table, a metric label or a log line; a log may carry a short hex prefix of the digest.
//
// digest_of() hashes its parts framed unambiguously: each part is preceded by its length as 8
// bytes big-endian, so {"ab", "c"}, {"a", "bc"} and {"abc"} all differ. It is NOT the plain
// SHA-256 of the concatenation; sha256() is that, for raw bytes.
//
// Cost and allocation: both run on a reactor per request and allocate nothing in steady state.
// With OpenSSL 3.1 or later each thread reuses one EVP_MD_CTX (thread_local, made on its first
// digest) with one SHA-256 EVP_MD fetched once; re-initialising it keeps the provider's context.
// OpenSSL 3.0 (Debian 12) allocates a fresh provider context on every EVP_DigestInit_ex2 even
// then, so with 3.0's headers the low-level SHA256_Init/Update/Final, on a context on the stack,
// are used instead (deprecated in 3.0, never allocating). About 100 ns for a rule name and a
// 20-byte identity, 250 ns for a 256-byte one (x86-64 with SHA-NI). The test counts OpenSSL's
// own allocations (CRYPTO_set_mem_functions): floodgate's operator-new counter cannot see them.
//
// Failure: libcrypto's SHA-256 can fail only when the first call on a thread cannot allocate its
// context (the 3.1+ path). The result is then the all-zero digest (every identity in one bucket:
// the limit still applies, to everyone together) and failed() says so, for the caller to count.
//
// Thread-safety: any thread; no shared mutable state (the EVP_MD is read-only once fetched).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

namespace floodgate::resilience {

using Digest = std::array<uint8_t, 32>;

// SHA-256 of `parts`, each length-prefixed (see above).
Digest digest_of(std::initializer_list<std::string_view> parts) noexcept;

// SHA-256 of `bytes` as they are (no framing).
Digest sha256(std::string_view bytes) noexcept;

// Whether `d` is the all-zero digest that reports a libcrypto failure (SHA-256 never yields it
// for any input anyone can find).
bool failed(const Digest& d) noexcept;

// Writes the first min(out.size(), 64) lower-case hex digits of `d` into `out` and returns
// them: 8 digits (out of a char[8]) are enough for a log line to tell identities apart without
// revealing them.
std::string_view hex_prefix(const Digest& d, std::span<char> out) noexcept;

}  // namespace floodgate::resilience
