// The keys of the TLS session tickets floodgate issues: one set for the whole process, shared
// by every [[server.tls]] context and every generation (so a ticket survives a reload), and
// rotated by the main thread on a fixed period, independent of reloads. A key encrypts the
// tickets of one period and still decrypts them during the next; a ticket under the previous
// key resumes and is replaced by one under the current key. The keys live in memory only: a
// restart starts a new set.
//
// The reactors read the keys in OpenSSL's ticket callback, during handshakes, without a lock:
// each key sits in one of four slots of atomic words behind a sequence count (a seqlock), and
// a rotation writes the slot no reader uses (neither the current key nor the previous).
#pragma once

#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace floodgate::net {

class TicketKeys {
 public:
  static constexpr std::chrono::hours kPeriod{1};  // between rotations
  static constexpr std::size_t kNameBytes = 16;    // the key name that opens a ticket
  static constexpr std::size_t kSecretBytes = 32;  // AES-256-CBC key, HMAC-SHA256 key

  struct Key {
    std::array<unsigned char, kNameBytes> name{};
    std::array<unsigned char, kSecretBytes> aes{};
    std::array<unsigned char, kSecretBytes> hmac{};
    bool operator==(const Key&) const = default;
  };
  struct Found {
    Key key;
    bool renew = false;  // the previous key: the client gets a new ticket
  };

  TicketKeys();  // a first key, from OpenSSL's random generator
  TicketKeys(const TicketKeys&) = delete;
  TicketKeys& operator=(const TicketKeys&) = delete;

  // A fresh key becomes the current one and the current one the previous; the one before is
  // forgotten. One thread at a time (the main thread's timer). False, with the keys
  // unchanged, when OpenSSL's random generator fails.
  bool rotate() noexcept;
  // The key new tickets are encrypted with.
  Key current() const noexcept;
  // The current or previous key named `name` (kNameBytes), or nothing: a full handshake.
  std::optional<Found> find(const unsigned char* name) const noexcept;

  // The set every floodgate TLS context uses.
  static TicketKeys& process();
  // For SSL_CTX_set_tlsext_ticket_key_evp_cb: encrypts and decrypts tickets with process().
  static int callback(SSL* ssl, unsigned char* name, unsigned char* iv, EVP_CIPHER_CTX* cipher,
                      EVP_MAC_CTX* mac, int encrypt);

 private:
  static constexpr std::size_t kSlots = 4;
  static constexpr std::size_t kWords = (kNameBytes + 2 * kSecretBytes) / sizeof(uint64_t);
  static_assert(kWords * sizeof(uint64_t) == sizeof(Key));
  struct Slot {
    std::atomic<uint64_t> sequence{0};  // odd while a rotation writes the slot
    std::array<std::atomic<uint64_t>, kWords> words{};
  };

  Key load(const Slot& slot) const noexcept;
  static void store(Slot& slot, const Key& key) noexcept;

  std::array<Slot, kSlots> slots_{};
  std::atomic<uint64_t> serial_{0};  // slots_[serial_ % kSlots] holds the current key
};

}  // namespace floodgate::net
