// [resilience.protocol]: which requests floodgate forwards at all. Each key's syntax and its
// errors, and the rules of seed 004 between the keys: the CONNECT allowlists need
// allow_connect, allow_connect needs an allowlist (or floodgate is an open proxy), and 0-RTT
// early data takes only GET and HEAD.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using testing::dump;
using testing::kMinimal;
using testing::load;
using testing::only;
using Strings = std::vector<std::string>;

// [resilience.protocol] on line 1, `body` from line 2 on, then the minimal upstream and route.
LoadResult protocol(std::string_view body) {
  return load("[resilience.protocol]\n" + std::string(body) + "\n\n" + std::string(kMinimal));
}

const resilience::ProtocolParams& protocol_of(const LoadResult& r) {
  return r.config->resilience.protocol;
}

struct KeyError {
  std::string_view name;
  std::string_view body;      // from line 2 of [resilience.protocol]
  std::string_view expected;  // the formatted diagnostic
};

void PrintTo(const KeyError& c, std::ostream* os) {
  *os << c.name;
}

class ConfigFrontProtocolErrors : public ::testing::TestWithParam<KeyError> {};

TEST_P(ConfigFrontProtocolErrors, AreReportedWithPositionPathAndFix) {
  EXPECT_EQ(only(protocol(GetParam().body)), GetParam().expected);
}

// Each CONNECT authority case allows CONNECT on port 443 too, so that only the authority is
// at fault.
INSTANTIATE_TEST_SUITE_P(
    Keys, ConfigFrontProtocolErrors,
    ::testing::Values(
        KeyError{"method_not_a_token", "allowed_methods = [\"GET\", \"GE(T\"]",
                 "test.toml:2:27: error: resilience.protocol.allowed_methods[1]: \"GE(T\" is not "
                 "a method: a method is a token of letters, digits and !#$%&'*+-.^_`|~ (RFC 9110 "
                 "section 5.6.2), e.g. \"GET\""},
        KeyError{"duplicate_method", "allowed_methods = [\"GET\", \"GET\"]",
                 "test.toml:2:27: error: resilience.protocol.allowed_methods[1]: duplicate "
                 "\"GET\" (same as resilience.protocol.allowed_methods[0]); remove one of them"},
        KeyError{"relative_denied_prefix", "denied_path_prefixes = [\"admin\"]",
                 "test.toml:2:25: error: resilience.protocol.denied_path_prefixes[0]: \"admin\" "
                 "must start with \"/\"; e.g. \"/admin\""},
        KeyError{"denied_prefix_with_query", "denied_path_prefixes = [\"/admin?x\"]",
                 "test.toml:2:25: error: resilience.protocol.denied_path_prefixes[0]: "
                 "\"/admin?x\" contains '?'; paths are matched without the query, e.g. "
                 "\"/admin\""},
        KeyError{"encoded_denied_prefix", "denied_path_prefixes = [\"/%61dmin\"]",
                 "test.toml:2:25: error: resilience.protocol.denied_path_prefixes[0]: "
                 "\"/%61dmin\" never matches: request paths are matched in normal form "
                 "(percent-encoded letters, digits and -._~ decoded, other percent-encodings in "
                 "upper case, repeated slashes merged); write \"/admin\""},
        KeyError{"lower_case_percent_hex", "denied_path_prefixes = [\"/a%2fb\"]",
                 "test.toml:2:25: error: resilience.protocol.denied_path_prefixes[0]: "
                 "\"/a%2fb\" never matches: request paths are matched in normal form "
                 "(percent-encoded letters, digits and -._~ decoded, other percent-encodings in "
                 "upper case, repeated slashes merged); write \"/a%2Fb\""},
        KeyError{"repeated_slashes", "denied_path_prefixes = [\"//admin\"]",
                 "test.toml:2:25: error: resilience.protocol.denied_path_prefixes[0]: "
                 "\"//admin\" never matches: request paths are matched in normal form "
                 "(percent-encoded letters, digits and -._~ decoded, other percent-encodings in "
                 "upper case, repeated slashes merged); write \"/admin\""},
        KeyError{"dot_segment", "denied_path_prefixes = [\"/x/%2e%2e/admin\"]",
                 "test.toml:2:25: error: resilience.protocol.denied_path_prefixes[0]: "
                 "\"/x/%2e%2e/admin\" never matches: request paths are matched with their dot "
                 "segments (\"/./\", \"/../\") resolved; write the path without them"},
        KeyError{"bad_percent_encoding", "denied_path_prefixes = [\"/100%\"]",
                 "test.toml:2:25: error: resilience.protocol.denied_path_prefixes[0]: \"/100%\" "
                 "has a '%' that is not followed by two hex digits; write %25 for a literal '%'"},
        KeyError{"integer_boolean", "enforce_authority_host_match = 1",
                 "test.toml:2:1: error: resilience.protocol.enforce_authority_host_match: "
                 "expected a boolean, got an integer (1); e.g. enforce_authority_host_match = "
                 "false"},
        KeyError{"ports_not_an_array", "allow_connect = true\nconnect_allowed_ports = 443",
                 "test.toml:3:1: error: resilience.protocol.connect_allowed_ports: expected an "
                 "array of port numbers, got an integer (443); e.g. connect_allowed_ports = "
                 "[443]"},
        KeyError{"port_zero", "allow_connect = true\nconnect_allowed_ports = [0]",
                 "test.toml:3:26: error: resilience.protocol.connect_allowed_ports[0]: 0 is out "
                 "of range; use a port from 1 to 65535"},
        KeyError{"port_too_high", "allow_connect = true\nconnect_allowed_ports = [443, 65536]",
                 "test.toml:3:31: error: resilience.protocol.connect_allowed_ports[1]: 65536 is "
                 "out of range; use a port from 1 to 65535"},
        KeyError{"quoted_port", "allow_connect = true\nconnect_allowed_ports = [\"443\"]",
                 "test.toml:3:26: error: resilience.protocol.connect_allowed_ports[0]: expected a "
                 "port number, got a string (\"443\"); e.g. 443"},
        KeyError{"duplicate_port", "allow_connect = true\nconnect_allowed_ports = [443, 443]",
                 "test.toml:3:31: error: resilience.protocol.connect_allowed_ports[1]: duplicate "
                 "port 443 (same as resilience.protocol.connect_allowed_ports[0]); remove one of "
                 "them"},
        KeyError{"authority_without_port",
                 "allow_connect = true\nconnect_allowed_authorities = [\"db.internal\"]",
                 "test.toml:3:32: error: resilience.protocol.connect_allowed_authorities[0]: "
                 "\"db.internal\" is not a CONNECT authority: the port is missing; a CONNECT "
                 "names host:port, e.g. \"db.internal:5432\""},
        KeyError{"wildcard_authority",
                 "allow_connect = true\nconnect_allowed_authorities = [\"*.internal:443\"]",
                 "test.toml:3:32: error: resilience.protocol.connect_allowed_authorities[0]: "
                 "\"*.internal:443\" is not a CONNECT authority: wildcards are not supported; "
                 "list each host:port exactly"},
        KeyError{"authority_with_scheme",
                 "allow_connect = true\nconnect_allowed_authorities = [\"https://db:443\"]",
                 "test.toml:3:32: error: resilience.protocol.connect_allowed_authorities[0]: "
                 "\"https://db:443\" is not a CONNECT authority: write only host:port, without a "
                 "scheme, user or path, e.g. \"db.internal:5432\""},
        KeyError{"authority_port_zero",
                 "allow_connect = true\nconnect_allowed_authorities = [\"db:0\"]",
                 "test.toml:3:32: error: resilience.protocol.connect_allowed_authorities[0]: "
                 "\"db:0\" is not a CONNECT authority: the port must be a number from 1 to "
                 "65535"},
        KeyError{"authority_port_leading_zero",
                 "allow_connect = true\nconnect_allowed_authorities = [\"db:05432\"]",
                 "test.toml:3:32: error: resilience.protocol.connect_allowed_authorities[0]: "
                 "\"db:05432\" is not a CONNECT authority: write the port without leading zeros"},
        KeyError{"bare_ipv6_authority",
                 "allow_connect = true\nconnect_allowed_authorities = [\"::1:443\"]",
                 "test.toml:3:32: error: resilience.protocol.connect_allowed_authorities[0]: "
                 "\"::1:443\" is not a CONNECT authority: IPv6 addresses need brackets, e.g. "
                 "\"[2001:db8::1]:443\""},
        KeyError{"bad_ipv6_authority",
                 "allow_connect = true\nconnect_allowed_authorities = [\"[zz::1]:443\"]",
                 "test.toml:3:32: error: resilience.protocol.connect_allowed_authorities[0]: "
                 "\"[zz::1]:443\" is not a CONNECT authority: 'zz::1' is not an IPv6 address"},
        KeyError{"authority_with_space",
                 "allow_connect = true\nconnect_allowed_authorities = [\"db internal:443\"]",
                 "test.toml:3:32: error: resilience.protocol.connect_allowed_authorities[0]: "
                 "\"db internal:443\" is not a CONNECT authority: use a name of letters, digits, "
                 "'-', '.', '_' and '~', an IPv4 address, or an IPv6 address in brackets"},
        KeyError{"authority_differing_in_case_only",
                 "allow_connect = true\n"
                 "connect_allowed_authorities = [\"db.internal:5432\", \"DB.internal:5432\"]",
                 "test.toml:3:52: error: resilience.protocol.connect_allowed_authorities[1]: "
                 "duplicate \"DB.internal:5432\" (same as "
                 "resilience.protocol.connect_allowed_authorities[0]); remove one of them"},
        KeyError{"seed_header_count", "max_headers_count = 64",
                 "test.toml:2:1: error: resilience.protocol.max_headers_count: unknown key "
                 "'max_headers_count' in [resilience.protocol]; 'max_headers_count' belongs in "
                 "[server], as max_headers"},
        KeyError{"seed_header_bytes", "max_headers_bytes = 8192",
                 "test.toml:2:1: error: resilience.protocol.max_headers_bytes: unknown key "
                 "'max_headers_bytes' in [resilience.protocol]; 'max_headers_bytes' belongs in "
                 "[server], as max_header_bytes"},
        KeyError{"typo", "allow_conect = true",
                 "test.toml:2:1: error: resilience.protocol.allow_conect: unknown key "
                 "'allow_conect' in [resilience.protocol] (did you mean 'allow_connect'?); "
                 "expected one of: allowed_methods, denied_path_prefixes, "
                 "enforce_authority_host_match, allow_connect, connect_allowed_ports, "
                 "connect_allowed_authorities, allow_0rtt, early_data_safe_methods, mode"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ConfigFrontProtocol, AcceptsAnIpv6AndAnIpv4AuthorityAndStoresHostsInLowerCase) {
  const LoadResult r = protocol(
      "allow_connect = true\n"
      "connect_allowed_authorities = [\"[::1]:443\", \"10.0.0.7:22\", \"Mail_1.Example:25\"]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(protocol_of(r).connect_allowed_authorities,
            (Strings{"[::1]:443", "10.0.0.7:22", "mail_1.example:25"}));
}

// --- CONNECT -------------------------------------------------------------------------------

TEST(ConfigFrontProtocol, RefusesAllowConnectWithoutAnAllowlistAsAnOpenProxy) {
  EXPECT_EQ(only(protocol("allow_connect = true")),
            "test.toml:2:1: error: resilience.protocol.allow_connect: allow_connect = true with "
            "both connect_allowed_ports and connect_allowed_authorities empty would let any "
            "client open a TCP tunnel to any host and port through floodgate (an open proxy); "
            "list what may be reached, e.g. connect_allowed_authorities = [\"db.internal:5432\"], "
            "or set allow_connect = false");
  EXPECT_FALSE(protocol("allow_connect = true\nconnect_allowed_ports = []").ok());
}

TEST(ConfigFrontProtocol, AcceptsAllowConnectWithEitherAllowlist) {
  EXPECT_TRUE(protocol("allow_connect = true\nconnect_allowed_ports = [443]").diagnostics.empty());
  const LoadResult r =
      protocol("allow_connect = true\nconnect_allowed_authorities = [\"db.internal:5432\"]");
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigFrontProtocol, RefusesPortsWithoutAllowConnectNamingBothKeys) {
  EXPECT_EQ(only(protocol("connect_allowed_ports = [443]")),
            "test.toml:2:1: error: resilience.protocol.connect_allowed_ports: "
            "connect_allowed_ports is set, but allow_connect = false, so it allows nothing (the "
            "allowlists only narrow allow_connect = true); set allow_connect = true, or remove "
            "connect_allowed_ports");
}

TEST(ConfigFrontProtocol, RefusesAuthoritiesWithoutAllowConnectNamingBothKeys) {
  EXPECT_EQ(only(protocol("allow_connect = false\nconnect_allowed_authorities = [\"db:5432\"]")),
            "test.toml:3:1: error: resilience.protocol.connect_allowed_authorities: "
            "connect_allowed_authorities is set, but allow_connect = false, so it allows "
            "nothing (the allowlists only narrow allow_connect = true); set allow_connect = "
            "true, or remove connect_allowed_authorities");
}

TEST(ConfigFrontProtocol, DoesNotCallAnAllowlistWithErrorsEmpty) {
  const LoadResult r = protocol("allow_connect = true\nconnect_allowed_ports = [0]");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "resilience.protocol.connect_allowed_ports[0]");
}

TEST(ConfigFrontProtocol, DoesNotJudgeTheAllowlistsAgainstAnInvalidAllowConnect) {
  const LoadResult r = protocol("allow_connect = \"yes\"\nconnect_allowed_ports = [443]");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "resilience.protocol.allow_connect");
}

TEST(ConfigFrontProtocol, WarnsOfAnAuthorityThatThePortListAlreadyOpensToEveryHost) {
  const LoadResult r = protocol(
      "allow_connect = true\nconnect_allowed_ports = [443]\n"
      "connect_allowed_authorities = [\"db.internal:5432\", \"api.internal:443\"]");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:4:52: warning: resilience.protocol.connect_allowed_authorities[1]: "
            "\"api.internal:443\" adds nothing: connect_allowed_ports lists 443, which allows a "
            "CONNECT to any host on that port; to allow only the hosts listed here, remove 443 "
            "from connect_allowed_ports");
}

TEST(ConfigFrontProtocol, WarnsWhenTheMethodListRefusesTheConnectItAllows) {
  const LoadResult r =
      protocol("allowed_methods = [\"GET\"]\nallow_connect = true\nconnect_allowed_ports = [443]");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:2:1: warning: resilience.protocol.allowed_methods: allow_connect = true, "
            "but allowed_methods does not list \"CONNECT\", so every CONNECT is refused with 405 "
            "method_not_allowed; add \"CONNECT\" to allowed_methods, or set allow_connect = "
            "false");
}

TEST(ConfigFrontProtocol, WarnsWhenTheMethodListAllowsAConnectThatIsOff) {
  const LoadResult r = protocol("allowed_methods = [\"GET\", \"CONNECT\"]");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:2:1: warning: resilience.protocol.allowed_methods: allowed_methods lists "
            "\"CONNECT\", but allow_connect = false, so every CONNECT is still refused "
            "(connect_denied); set allow_connect = true with an allowlist, or remove "
            "\"CONNECT\"");
}

// --- methods and paths ---------------------------------------------------------------------

TEST(ConfigFrontProtocol, WarnsThatALowerCaseMethodNeverMatches) {
  const LoadResult r = protocol("allowed_methods = [\"GET\", \"post\"]");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:2:27: warning: resilience.protocol.allowed_methods[1]: \"post\" never "
            "matches: methods are case-sensitive (RFC 9110 section 9.1), and \"post\" is not "
            "\"POST\"; write \"POST\"");
}

TEST(ConfigFrontProtocol, AcceptsAnExtensionMethodToken) {
  const LoadResult r = protocol("allowed_methods = [\"GET\", \"PROPFIND\", \"M-SEARCH\"]");
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
}

TEST(ConfigFrontProtocol, AcceptsPrefixesThatDenyDotFilesAndEncodedSlashes) {
  const LoadResult r =
      protocol("denied_path_prefixes = [\"/.\", \"/.git\", \"/a%2Fb\", \"/a/..b\"]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(protocol_of(r).denied_path_prefixes, (Strings{"/.", "/.git", "/a%2Fb", "/a/..b"}));
}

TEST(ConfigFrontProtocol, WarnsThatDenyingTheRootRefusesEverything) {
  const LoadResult r = protocol("denied_path_prefixes = [\"/\"]");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(only(r),
            "test.toml:2:25: warning: resilience.protocol.denied_path_prefixes[0]: \"/\" matches "
            "every request, so every request is refused with 403 denied_path; list the paths to "
            "deny, e.g. \"/admin\"");
}

// --- 0-RTT -------------------------------------------------------------------------------------

TEST(ConfigFrontProtocol, RefusesAnUnsafeEarlyDataMethodWhen0RttIsOn) {
  EXPECT_EQ(only(protocol("allow_0rtt = true\nearly_data_safe_methods = [\"GET\", \"POST\"]")),
            "test.toml:3:35: error: resilience.protocol.early_data_safe_methods[1]: \"POST\" "
            "cannot be accepted in early data: 0-RTT data can be replayed by an attacker (RFC "
            "8470), so with allow_0rtt = true only \"GET\" and \"HEAD\" may be listed; remove it, "
            "or set allow_0rtt = false");
}

TEST(ConfigFrontProtocol, AcceptsAnyValidEarlyDataMethodWhile0RttIsOff) {
  const LoadResult r = protocol("early_data_safe_methods = [\"GET\", \"POST\"]");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(protocol_of(r).early_data_safe_methods, (Strings{"GET", "POST"}));
}

TEST(ConfigFrontProtocol, ValidatesEarlyDataMethodTokensWhile0RttIsOff) {
  const LoadResult r = protocol("early_data_safe_methods = [\"GET HEAD\"]");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "resilience.protocol.early_data_safe_methods[0]");
}

TEST(ConfigFrontProtocol, Accepts0RttWithTheDefaultSafeMethods) {
  const LoadResult r = protocol("allow_0rtt = true");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_TRUE(protocol_of(r).allow_0rtt);
}

TEST(ConfigFrontProtocol, Accepts0RttWithNoEarlyDataMethodAtAll) {
  EXPECT_TRUE(protocol("allow_0rtt = true\nearly_data_safe_methods = []").diagnostics.empty());
}

}  // namespace
}  // namespace floodgate::config
