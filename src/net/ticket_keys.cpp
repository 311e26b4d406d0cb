// TLS session ticket keys (ticket_keys.h).
#include "floodgate/net/ticket_keys.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <cstring>
#include <type_traits>

namespace floodgate::net {

namespace {

constexpr std::size_t kIvBytes = 16;  // AES-256-CBC's block

// AES-256-CBC fetched once: an implicit fetch per handshake would search the provider's
// method store every time.
const EVP_CIPHER* ticket_cipher() {
  static EVP_CIPHER* const cipher = EVP_CIPHER_fetch(nullptr, "AES-256-CBC", nullptr);
  return cipher;
}

std::optional<TicketKeys::Key> random_key() {
  TicketKeys::Key key;
  if (RAND_bytes(key.name.data(), static_cast<int>(key.name.size())) != 1 ||
      RAND_priv_bytes(key.aes.data(), static_cast<int>(key.aes.size())) != 1 ||
      RAND_priv_bytes(key.hmac.data(), static_cast<int>(key.hmac.size())) != 1) {
    return std::nullopt;
  }
  return key;
}

}  // namespace

TicketKeys::TicketKeys() {
  // Without a first key no ticket could be issued: OpenSSL's generator failing at start-up
  // is not something floodgate can run without.
  const std::optional<Key> key = random_key();
  if (!key) std::abort();
  store(slots_[0], *key);
}

TicketKeys::Key TicketKeys::load(const Slot& slot) const noexcept {
  std::array<uint64_t, kWords> words{};
  for (;;) {
    const uint64_t before = slot.sequence.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < kWords; ++i) {
      words[i] = slot.words[i].load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if ((before & 1U) == 0 && slot.sequence.load(std::memory_order_relaxed) == before) break;
  }
  // Key is trivially copyable (its member initializers only make it not trivial, which is what
  // GCC's -Wclass-memaccess looks at, hence the cast).
  static_assert(std::is_trivially_copyable_v<Key>);
  Key key;
  std::memcpy(static_cast<void*>(&key), words.data(), sizeof(key));
  return key;
}

void TicketKeys::store(Slot& slot, const Key& key) noexcept {
  std::array<uint64_t, kWords> words{};
  std::memcpy(words.data(), &key, sizeof(key));
  const uint64_t sequence = slot.sequence.load(std::memory_order_relaxed);
  slot.sequence.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < kWords; ++i) {
    slot.words[i].store(words[i], std::memory_order_relaxed);
  }
  slot.sequence.store(sequence + 2, std::memory_order_release);
  OPENSSL_cleanse(words.data(), sizeof(words));
}

bool TicketKeys::rotate() noexcept {
  const std::optional<Key> key = random_key();
  if (!key) return false;
  const uint64_t next = serial_.load(std::memory_order_relaxed) + 1;
  store(slots_[next % kSlots], *key);
  serial_.store(next, std::memory_order_release);
  return true;
}

TicketKeys::Key TicketKeys::current() const noexcept {
  return load(slots_[serial_.load(std::memory_order_acquire) % kSlots]);
}

std::optional<TicketKeys::Found> TicketKeys::find(const unsigned char* name) const noexcept {
  const uint64_t serial = serial_.load(std::memory_order_acquire);
  for (uint64_t age = 0; age < 2 && age <= serial; ++age) {
    Key key = load(slots_[(serial - age) % kSlots]);
    if (std::memcmp(key.name.data(), name, kNameBytes) == 0) return Found{key, age == 1};
  }
  return std::nullopt;
}

TicketKeys& TicketKeys::process() {
  static TicketKeys keys;
  return keys;
}

// OpenSSL's contract (SSL_CTX_set_tlsext_ticket_key_evp_cb): when encrypting, fill the key
// name and IV and set up both contexts, 1; when decrypting, 0 for an unknown key name (a full
// handshake), 1 when the ticket is good, 2 when it is good but should be replaced; -1 on error.
int TicketKeys::callback(SSL* /*ssl*/, unsigned char* name, unsigned char* iv,
                         EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int encrypt) {
  const EVP_CIPHER* aes = ticket_cipher();
  if (aes == nullptr) return -1;
  Key key;
  int result = 1;
  if (encrypt == 1) {
    key = process().current();
    if (RAND_bytes(iv, static_cast<int>(kIvBytes)) != 1) return -1;
    std::memcpy(name, key.name.data(), kNameBytes);
  } else {
    const std::optional<Found> found = process().find(name);
    if (!found) return 0;
    key = found->key;
    result = found->renew ? 2 : 1;
  }
  char digest[] = "SHA256";
  const std::array<OSSL_PARAM, 3> params{
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key.hmac.data(), key.hmac.size()),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end()};
  const int ok = EVP_MAC_CTX_set_params(mac, params.data()) == 1 &&
                 (encrypt == 1 ? EVP_EncryptInit_ex(cipher, aes, nullptr, key.aes.data(), iv)
                               : EVP_DecryptInit_ex(cipher, aes, nullptr, key.aes.data(), iv)) == 1;
  OPENSSL_cleanse(&key, sizeof(key));
  return ok ? result : -1;
}

}  // namespace floodgate::net
