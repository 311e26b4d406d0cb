// The SHA-256 identity digest: NIST vectors for the raw hash, the framing of digest_of against
// libcrypto's one-shot EVP_Digest of the same framed bytes, the hex prefix, and that repeated
// digests allocate nothing (counted in OpenSSL's own allocator, which floodgate's operator-new
// counter cannot see: libcrypto allocates with malloc).
#include "floodgate/resilience/identity_digest.h"

#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include "floodgate/core/heap_count.h"

namespace floodgate::resilience {
namespace {

// --- counting libcrypto's allocations, per thread

thread_local uint64_t openssl_allocations = 0;

void* counting_malloc(std::size_t n, const char* /*file*/, int /*line*/) {
  ++openssl_allocations;
  return std::malloc(n);
}
void* counting_realloc(void* p, std::size_t n, const char* /*file*/, int /*line*/) {
  ++openssl_allocations;
  return std::realloc(p, n);
}
void counting_free(void* p, const char* /*file*/, int /*line*/) {
  std::free(p);
}

// Installed before main: OpenSSL accepts allocator functions only before its first allocation.
const bool kAllocatorInstalled =
    CRYPTO_set_mem_functions(counting_malloc, counting_realloc, counting_free) == 1;

std::string hex(const Digest& d) {
  std::array<char, 64> buf{};
  return std::string(hex_prefix(d, buf));
}

// The framing digest_of documents, built by hand: each part after its length, 8 bytes BE.
std::string framed(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (const std::string_view p : parts) {
    for (int shift = 56; shift >= 0; shift -= 8) {
      out.push_back(static_cast<char>((uint64_t{p.size()} >> shift) & 0xff));
    }
    out.append(p);
  }
  return out;
}

Digest one_shot(std::string_view bytes) {
  Digest d{};
  unsigned int len = 0;
  EXPECT_EQ(EVP_Digest(bytes.data(), bytes.size(), d.data(), &len, EVP_sha256(), nullptr), 1);
  EXPECT_EQ(len, d.size());
  return d;
}

TEST(Sha256, MatchesTheNistVectors) {
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, OfAMillionAsMatchesTheNistVector) {
  EXPECT_EQ(hex(sha256(std::string(1'000'000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(DigestOf, IsTheSha256OfTheLengthPrefixedParts) {
  EXPECT_EQ(digest_of({"abc"}), one_shot(framed({"abc"})));
  EXPECT_EQ(digest_of({"tenant-api", "acme"}), one_shot(framed({"tenant-api", "acme"})));
  EXPECT_EQ(digest_of({}), sha256(""));
  EXPECT_EQ(digest_of({""}), one_shot(std::string(8, '\0')));
}

TEST(DigestOf, IsNotThePlainHashOfTheConcatenation) {
  EXPECT_NE(digest_of({"abc"}), sha256("abc"));
}

TEST(DigestOf, TellsApartPartsThatConcatenateAlike) {
  const Digest ab_c = digest_of({"ab", "c"});
  EXPECT_NE(ab_c, digest_of({"a", "bc"}));
  EXPECT_NE(ab_c, digest_of({"abc"}));
  EXPECT_NE(ab_c, digest_of({"abc", ""}));
  EXPECT_NE(digest_of({"abc"}), digest_of({"abc", ""}));
  EXPECT_NE(digest_of({"", "abc"}), digest_of({"abc", ""}));
}

TEST(DigestOf, IsStableAcrossCallsAndThreads) {
  const Digest here = digest_of({"rule", "203.0.113.9"});
  EXPECT_EQ(digest_of({"rule", "203.0.113.9"}), here);
  Digest there{};
  std::thread([&there] { there = digest_of({"rule", "203.0.113.9"}); }).join();
  EXPECT_EQ(there, here);
  EXPECT_FALSE(failed(here));
}

TEST(DigestOf, HashesLongIdentitiesWhole) {
  const std::string long_a(300, 'x');
  std::string long_b = long_a;
  long_b.back() = 'y';
  EXPECT_NE(digest_of({"r", long_a}), digest_of({"r", long_b}));
}

TEST(HexPrefix, WritesAsManyDigitsAsTheBufferHolds) {
  const Digest d = sha256("abc");
  std::array<char, 8> eight{};
  EXPECT_EQ(hex_prefix(d, eight), "ba7816bf");
  std::array<char, 100> more{};
  EXPECT_EQ(hex_prefix(d, more).size(), 64u);
  EXPECT_EQ(hex_prefix(d, std::span<char>{}), "");
}

TEST(Failed, IsOnlyTheAllZeroDigest) {
  EXPECT_TRUE(failed(Digest{}));
  Digest d{};
  d[31] = 1;
  EXPECT_FALSE(failed(d));
}

TEST(OpensslAllocationCounter, SeesLibcryptoAllocate) {
  ASSERT_TRUE(kAllocatorInstalled) << "libcrypto allocated before the test could count";
  const uint64_t before = openssl_allocations;
  EVP_MD_CTX_free(EVP_MD_CTX_new());
  EXPECT_GT(openssl_allocations - before, 0u);
}

TEST(DigestOf, RepeatedDigestsAllocateNothingAfterTheFirstOnAThread) {
  ASSERT_TRUE(kAllocatorInstalled) << "libcrypto allocated before the test could count";
  uint64_t steady_openssl = 0, steady_new = 0;
  std::thread([&] {
    count_heap_allocations_on_this_thread();
    static_cast<void>(digest_of({"warm", "up"}));  // may make this thread's context
    const uint64_t before = openssl_allocations;
    const uint64_t new_before = counted_heap_allocations();
    bool any_failed = false;
    for (int i = 0; i < 1000; ++i) {
      const std::string_view id("token", static_cast<std::size_t>(i % 6));
      any_failed |= failed(digest_of({"tenant-api", "acme", id})) || failed(sha256(id));
    }
    steady_openssl = openssl_allocations - before;
    steady_new = counted_heap_allocations() - new_before;
    EXPECT_FALSE(any_failed);
  }).join();
  EXPECT_EQ(steady_openssl, 0u);
  EXPECT_EQ(steady_new, 0u);
}

}  // namespace
}  // namespace floodgate::resilience
