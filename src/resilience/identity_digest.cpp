#include "floodgate/resilience/identity_digest.h"

#include <openssl/opensslv.h>
#if OPENSSL_VERSION_NUMBER >= 0x30100000L
#include <openssl/evp.h>
#else
#include <openssl/sha.h>
#endif

#include <algorithm>
#include <cstddef>

namespace floodgate::resilience {

namespace {

#if OPENSSL_VERSION_NUMBER >= 0x30100000L

// OpenSSL 3.1 and later: one EVP_MD_CTX per thread, made on the thread's first digest, and one
// SHA-256 EVP_MD for every thread, fetched once (an explicit fetch: EVP_sha256() would look the
// provider's implementation up again on every init). Initialising the context again with the
// same EVP_MD keeps the provider's context (openssl/openssl#18105), so steady state allocates
// nothing. The EVP_MD is never freed: it lives as long as libcrypto does, and freeing it from a
// static destructor could run after OpenSSL's own atexit cleanup.
class Sha256 {
 public:
  bool init() noexcept {
    static const EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    thread_local const Context context;
    ctx_ = context.ctx;
    return md != nullptr && ctx_ != nullptr && EVP_DigestInit_ex2(ctx_, md, nullptr) == 1;
  }
  bool update(const void* p, std::size_t n) noexcept { return EVP_DigestUpdate(ctx_, p, n) == 1; }
  bool finish(Digest& out) noexcept {
    unsigned int len = 0;
    return EVP_DigestFinal_ex(ctx_, out.data(), &len) == 1 && len == out.size();
  }

 private:
  struct Context {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    Context() noexcept = default;
    ~Context() { EVP_MD_CTX_free(ctx); }
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
  };
  EVP_MD_CTX* ctx_ = nullptr;
};

#else

// OpenSSL 3.0 (Debian 12's): EVP_DigestInit_ex2 frees the provider's context and allocates a new
// one on every init, reused EVP_MD_CTX or not (measured: one 112-byte allocation per digest;
// fixed in 3.1 by openssl/openssl#18105). The low-level SHA256_* functions hash into a context
// on the stack and allocate nothing, ever; they are deprecated in 3.0 but present in every 3.x,
// and only used here where the headers are 3.0's.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
class Sha256 {
 public:
  bool init() noexcept { return SHA256_Init(&ctx_) == 1; }
  bool update(const void* p, std::size_t n) noexcept { return SHA256_Update(&ctx_, p, n) == 1; }
  bool finish(Digest& out) noexcept { return SHA256_Final(out.data(), &ctx_) == 1; }

 private:
  SHA256_CTX ctx_{};
};
#pragma GCC diagnostic pop

#endif

// Runs update(hash) between an init and a final; the zero digest when libcrypto fails.
template <class Update>
Digest run(Update&& update) noexcept {
  Digest out{};
  Sha256 hash;
  if (!hash.init() || !update(hash) || !hash.finish(out)) return Digest{};
  return out;
}

bool update_framed(Sha256& hash, std::string_view part) noexcept {
  std::array<unsigned char, 8> length{};
  uint64_t n = part.size();
  for (std::size_t i = length.size(); i-- > 0; n >>= 8) length[i] = static_cast<uint8_t>(n);
  return hash.update(length.data(), length.size()) && hash.update(part.data(), part.size());
}

}  // namespace

Digest digest_of(std::initializer_list<std::string_view> parts) noexcept {
  return run([parts](Sha256& hash) {
    return std::all_of(parts.begin(), parts.end(),
                       [&hash](std::string_view p) { return update_framed(hash, p); });
  });
}

Digest sha256(std::string_view bytes) noexcept {
  return run([bytes](Sha256& hash) { return hash.update(bytes.data(), bytes.size()); });
}

bool failed(const Digest& d) noexcept {
  return std::all_of(d.begin(), d.end(), [](uint8_t b) { return b == 0; });
}

std::string_view hex_prefix(const Digest& d, std::span<char> out) noexcept {
  const std::size_t n = std::min<std::size_t>(out.size(), 2 * d.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned nibble = (i % 2 == 0) ? d[i / 2] >> 4 : d[i / 2] & 0xfu;
    out[i] = "0123456789abcdef"[nibble];
  }
  return {out.data(), n};
}

}  // namespace floodgate::resilience
