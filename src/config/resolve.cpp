#include "floodgate/config/resolve.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <memory>

namespace floodgate::config {

Resolution resolve_server(const std::string& name, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
#ifdef FLOODGATE_FUZZING
  hints.ai_flags = AI_NUMERICHOST;  // a fuzz input never makes a DNS query
#endif
  addrinfo* raw = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &raw);
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(raw, &::freeaddrinfo);
  Resolution out;
  if (rc != 0) {
    out.error = rc == EAI_SYSTEM ? "the resolver failed" : ::gai_strerror(rc);
    return out;
  }
  for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
    std::array<char, NI_MAXHOST> host{};
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, host.data(), host.size(), nullptr, 0,
                      NI_NUMERICHOST) != 0) {
      continue;
    }
    const std::string ip(host.data());
    const std::string shown = a->ai_family == AF_INET6 ? "[" + ip + "]" : ip;
    out.addresses.push_back(Endpoint{ip, port, shown + ":" + std::to_string(port)});
  }
  const auto by_text = [](const Endpoint& a, const Endpoint& b) { return a.text < b.text; };
  std::sort(out.addresses.begin(), out.addresses.end(), by_text);
  out.addresses.erase(std::unique(out.addresses.begin(), out.addresses.end()), out.addresses.end());
  if (out.addresses.size() > kMaxAddressesPerName) {
    out.left_out = out.addresses.size() - kMaxAddressesPerName;
    out.addresses.resize(kMaxAddressesPerName);
  }
  if (out.addresses.empty()) out.error = "no address";
  return out;
}

std::string address_list(const std::vector<Endpoint>& addresses) {
  std::string out;
  for (const Endpoint& e : addresses) {
    if (!out.empty()) out += ", ";
    out += e.text;
  }
  return out;
}

}  // namespace floodgate::config
