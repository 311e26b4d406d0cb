#include "floodgate/resilience/protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "floodgate/routing/match_path.h"
#include "floodgate/routing/params.h"

namespace floodgate::resilience {
namespace {

// A request as the caller fills the view from the parsed head: the path normalised by MatchPath
// (of the path part of an absolute-form target), the authority split off an absolute form.
class Request {
 public:
  Request(std::string_view method, std::string_view target, std::string_view host = "example.com") {
    view_.method = method;
    view_.target = target;
    view_.host = host;
    view_.is_connect = method == "CONNECT";
    if (view_.is_connect) return;
    std::string_view path = target;
    if (const std::size_t scheme = target.find("://"); scheme != std::string_view::npos) {
      const std::string_view rest = target.substr(scheme + 3);
      const std::size_t slash = rest.find('/');
      view_.authority = rest.substr(0, slash);
      path = slash == std::string_view::npos ? "/" : rest.substr(slash);
    }
    EXPECT_EQ(match_.assign(path), PathVerdict::ok) << target;
    view_.path = match_.view();
  }
  Request(const Request&) = delete;
  const RequestView& view() const { return view_; }
  // Its head began in TLS early data (0-RTT).
  void arrived_early() { view_.early_data = true; }

 private:
  MatchPath match_;
  RequestView view_;
};

// A Verdict copied out of a policy that does not outlive the call (its Allow points into it).
struct Outcome {
  explicit Outcome(const Verdict& v) : reason(v.reason), status(v.status), allow(v.allow) {}
  bool pass() const { return reason == Reason::none; }
  Reason reason;
  int status;
  std::string allow;
};

Outcome check(const ProtocolParams& params, std::string_view method, std::string_view target,
              std::string_view host = "example.com") {
  const Request request(method, target, host);
  return Outcome(ProtocolPolicy(params).check(request.view()));
}

Outcome check_early(const ProtocolParams& params, std::string_view method,
                    std::string_view target = "/") {
  Request request(method, target);
  request.arrived_early();
  return Outcome(ProtocolPolicy(params).check(request.view()));
}

void expect_pass(const Outcome& v) {
  EXPECT_TRUE(v.pass()) << "refused: " << info(v.reason).name << " " << v.status;
  EXPECT_EQ(v.status, 0);
}

void expect_refused(const Outcome& v, Reason reason, int status) {
  EXPECT_EQ(v.reason, reason) << info(v.reason).name;
  EXPECT_EQ(v.status, status);
}

// Methods.

TEST(ProtocolMethods, AnEmptyListAllowsEveryMethod) {
  for (const char* method : {"GET", "POST", "PROPFIND", "PURGE"}) {
    expect_pass(check({}, method, "/"));
  }
}

TEST(ProtocolMethods, AMethodOutsideTheListIs405WithAllow) {
  const ProtocolParams params{.allowed_methods = {"GET", "HEAD", "POST"}};
  expect_pass(check(params, "POST", "/"));
  const Outcome v = check(params, "DELETE", "/");
  expect_refused(v, Reason::method_not_allowed, 405);
  EXPECT_EQ(v.allow, "GET, HEAD, POST");
}

TEST(ProtocolMethods, MatchingIsCaseSensitiveSoALowerCaseMethodIsRefused) {
  const ProtocolParams params{.allowed_methods = {"GET"}};
  expect_refused(check(params, "get", "/"), Reason::method_not_allowed, 405);
  expect_refused(check(params, "Get", "/"), Reason::method_not_allowed, 405);
}

TEST(ProtocolMethods, AllowListsEachMethodOnceInTheConfiguredOrder) {
  const ProtocolPolicy policy(ProtocolParams{.allowed_methods = {"POST", "GET", "POST"}});
  EXPECT_EQ(policy.allow(), "POST, GET");
}

TEST(ProtocolMethods, AllowOmitsConnectWhileConnectIsNotAllowed) {
  EXPECT_EQ(ProtocolPolicy(ProtocolParams{.allowed_methods = {"GET", "CONNECT"}}).allow(), "GET");
}

TEST(ProtocolMethods, AnythingButAMethodVerdictCarriesNoAllow) {
  const ProtocolParams params{.denied_path_prefixes = {"/admin"}};
  EXPECT_TRUE(check(params, "GET", "/admin").allow.empty());
}

// Denied paths.

TEST(ProtocolPaths, ADeniedPrefixIs403) {
  const ProtocolParams params{.denied_path_prefixes = {"/admin"}};
  expect_refused(check(params, "GET", "/admin"), Reason::denied_path, 403);
  expect_refused(check(params, "GET", "/admin/users?x=1"), Reason::denied_path, 403);
  expect_pass(check(params, "GET", "/"));
  expect_pass(check(params, "GET", "/public/admin"));
}

TEST(ProtocolPaths, APrefixIsAByteprefixAsInNginxAndHaproxy) {
  const ProtocolParams params{.denied_path_prefixes = {"/admin"}};
  expect_refused(check(params, "GET", "/administrator"), Reason::denied_path, 403);
  expect_refused(check(params, "GET", "/admin.php"), Reason::denied_path, 403);
  expect_refused(check(params, "GET", "/admin;jsessionid=1"), Reason::denied_path, 403);
  expect_refused(check(params, "GET", "/admin%2Fusers"), Reason::denied_path, 403);
}

TEST(ProtocolPaths, APrefixWithATrailingSlashAlsoDeniesThePathWithoutIt) {
  const ProtocolParams params{.denied_path_prefixes = {"/admin/"}};
  expect_refused(check(params, "GET", "/admin"), Reason::denied_path, 403);
  expect_refused(check(params, "GET", "/admin/x"), Reason::denied_path, 403);
  expect_pass(check(params, "GET", "/administrator"));
}

TEST(ProtocolPaths, EncodedAndDotSegmentSpellingsAreDeniedToo) {
  const ProtocolParams params{.denied_path_prefixes = {"/admin"}};
  for (const char* target : {"/%61dmin", "/%61%64%6D%69%6E/x", "/x/../admin", "//admin", "/./admin",
                             "/x/%2e%2e/admin", "/x/.%2E/admin/", "///admin//x"}) {
    expect_refused(check(params, "GET", target), Reason::denied_path, 403);
  }
}

TEST(ProtocolPaths, MatchingIsCaseSensitiveLikeNginxAndHaproxy) {
  const ProtocolParams params{.denied_path_prefixes = {"/admin"}};
  expect_pass(check(params, "GET", "/ADMIN"));
  expect_pass(check(params, "GET", "/%41dmin"));  // decodes to "/Admin"
}

TEST(ProtocolPaths, TheAbsoluteFormsPathIsMatchedToo) {
  const ProtocolParams params{.denied_path_prefixes = {"/admin"}};
  expect_refused(check(params, "GET", "http://example.com/x/../admin"), Reason::denied_path, 403);
}

TEST(ProtocolPaths, APathThatMayBeATruncationOfALongerDeniedOneIsDenied) {
  const std::string prefix(kMaxPathPrefixBytes + 10, 'a');
  const ProtocolPolicy policy(ProtocolParams{.denied_path_prefixes = {"/" + prefix}});
  const std::string kept = "/" + prefix.substr(0, kMaxPathPrefixBytes - 1);
  EXPECT_EQ(policy.check({.method = "GET", .path = kept}).reason, Reason::denied_path);
  const std::string shorter = kept.substr(0, kept.size() - 1);  // complete: not a truncation
  EXPECT_TRUE(policy.check({.method = "GET", .path = shorter}).pass());
}

// Authority and Host.

TEST(ProtocolAuthority, AnAbsoluteFormAuthorityDifferingFromHostIs400) {
  expect_refused(check({}, "GET", "http://other.example/", "example.com"),
                 Reason::authority_mismatch, 400);
  expect_refused(check({}, "GET", "http://example.com:8080/", "example.com"),
                 Reason::authority_mismatch, 400);
  expect_refused(check({}, "GET", "http://example.com/", ""), Reason::authority_mismatch, 400);
}

TEST(ProtocolAuthority, HostsCompareCaseInsensitively) {
  expect_pass(check({}, "GET", "http://EXAMPLE.com/", "example.COM"));
}

TEST(ProtocolAuthority, AMissingPortIsTheSchemesDefault) {
  expect_pass(check({}, "GET", "http://example.com/", "example.com:80"));
  expect_pass(check({}, "GET", "http://example.com:80/", "example.com"));
  expect_pass(check({}, "GET", "http://example.com:/", "example.com:80"));
  expect_pass(check({}, "GET", "https://example.com/", "example.com:443"));
  expect_refused(check({}, "GET", "https://example.com/", "example.com:80"),
                 Reason::authority_mismatch, 400);
  expect_pass(check({}, "GET", "http://example.com:8080/", "example.com:08080"));
}

TEST(ProtocolAuthority, ATrailingDotOrAnotherAddressSpellingIsAMismatch) {
  expect_refused(check({}, "GET", "http://example.com./", "example.com"),
                 Reason::authority_mismatch, 400);
  expect_refused(check({}, "GET", "http://[::1]/", "[0:0::1]"), Reason::authority_mismatch, 400);
  expect_pass(check({}, "GET", "http://[::1]:80/", "[::1]"));
}

TEST(ProtocolAuthority, OriginFormIsNeverChecked) {
  expect_pass(check({}, "GET", "/", "anything.example"));
}

TEST(ProtocolAuthority, TheCheckCanBeSwitchedOff) {
  expect_pass(check({.enforce_authority_host_match = false}, "GET", "http://other.example/"));
}

// CONNECT.

TEST(ProtocolConnect, IsRefused405WithAllowUnlessAllowed) {
  const Outcome v = check({}, "CONNECT", "example.com:443");
  expect_refused(v, Reason::connect_denied, 405);
  EXPECT_EQ(v.allow, kDefaultAllow);
  const Outcome listed = check({.allowed_methods = {"GET", "POST"}}, "CONNECT", "db:5432");
  expect_refused(listed, Reason::connect_denied, 405);
  EXPECT_EQ(listed.allow, "GET, POST");
}

ProtocolParams connect_to(std::vector<std::string> authorities, std::vector<uint16_t> ports = {}) {
  return {.allow_connect = true,
          .connect_allowed_ports = std::move(ports),
          .connect_allowed_authorities = std::move(authorities)};
}

TEST(ProtocolConnect, AnAllowedAuthorityPasses) {
  const ProtocolParams params = connect_to({"db.internal:5432"});
  expect_pass(check(params, "CONNECT", "db.internal:5432"));
  expect_pass(check(params, "CONNECT", "DB.Internal:5432"));
}

TEST(ProtocolConnect, AnyOtherAuthorityIs403) {
  const ProtocolParams params = connect_to({"db.internal:5432"});
  for (const char* target :
       {"db.internal:5433", "other:5432", "db.internal", "db.internal:", "db.internal.:5432",
        "db.internal:5432.evil.example:5432", "db.internal:5432@evil.example:5432",
        "db.internal:99999", "http://db.internal:5432/", "", ":5432"}) {
    expect_refused(check(params, "CONNECT", target), Reason::connect_denied, 403);
  }
}

TEST(ProtocolConnect, AnAllowedPortPassesForAnyHost) {
  const ProtocolParams params = connect_to({}, {443});
  expect_pass(check(params, "CONNECT", "anything.example:443"));
  expect_pass(check(params, "CONNECT", "[2001:db8::1]:443"));
  expect_pass(check(params, "CONNECT", "anything.example:0443"));
  expect_refused(check(params, "CONNECT", "anything.example:8443"), Reason::connect_denied, 403);
}

TEST(ProtocolConnect, MustAlsoBeInANonEmptyMethodList) {
  ProtocolParams params = connect_to({}, {443});
  params.allowed_methods = {"GET"};
  expect_refused(check(params, "CONNECT", "a:443"), Reason::method_not_allowed, 405);
  params.allowed_methods = {"GET", "CONNECT"};
  expect_pass(check(params, "CONNECT", "a:443"));
  EXPECT_EQ(ProtocolPolicy(params).allow(), "GET, CONNECT");
}

TEST(ProtocolConnect, IsJudgedOnItsTargetNotItsHostOrPath) {
  ProtocolParams params = connect_to({}, {443});
  params.denied_path_prefixes = {"/"};
  expect_pass(check(params, "CONNECT", "a:443", "other.example"));
}

TEST(ProtocolEarlyData, ASafeMethodInEarlyDataPasses) {
  expect_pass(check_early({}, "GET"));
  expect_pass(check_early({}, "HEAD", "/index.html"));
}

TEST(ProtocolEarlyData, AnyOtherMethodInEarlyDataIs425TooEarly) {
  expect_refused(check_early({}, "POST"), Reason::too_early, 425);
  expect_refused(check_early({}, "DELETE", "/item/1"), Reason::too_early, 425);
  expect_refused(check_early({}, "OPTIONS"), Reason::too_early, 425);
}

TEST(ProtocolEarlyData, TheSameMethodAfterTheHandshakePasses) {
  expect_pass(check({}, "POST", "/"));
}

TEST(ProtocolEarlyData, TheConfiguredSafeListIsTheOneApplied) {
  ProtocolParams p;
  p.early_data_safe_methods = {"GET"};
  expect_pass(check_early(p, "GET"));
  expect_refused(check_early(p, "HEAD"), Reason::too_early, 425);
}

TEST(ProtocolEarlyData, AMethodOutsideTheAllowListIsStill405First) {
  ProtocolParams p;
  p.allowed_methods = {"GET"};
  expect_refused(check_early(p, "POST"), Reason::method_not_allowed, 405);
}

TEST(ProtocolEarlyData, ADeniedPathIsStill403ForAnEarlyGet) {
  ProtocolParams p;
  p.denied_path_prefixes = {"/admin"};
  expect_refused(check_early(p, "GET", "/admin/x"), Reason::denied_path, 403);
}

TEST(ProtocolDefaults, PassOrdinaryRequestsAndRefuseConnect) {
  const ProtocolPolicy policy;
  EXPECT_TRUE(policy.check({.method = "GET", .target = "/", .path = "/", .host = "a"}).pass());
  EXPECT_EQ(policy.check({.method = "CONNECT", .target = "a:443", .is_connect = true}).status, 405);
}

// The helpers.

TEST(SplitAuthority, SplitsAtThePortColonAfterAnIpv6Literal) {
  const auto v6 = split_authority("[::1]:8080");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "[::1]");
  EXPECT_EQ(v6->port, "8080");
  const auto name = split_authority("example.com");
  ASSERT_TRUE(name);
  EXPECT_EQ(name->host, "example.com");
  EXPECT_TRUE(name->port.empty());
  EXPECT_FALSE(split_authority("[::1"));
  EXPECT_FALSE(split_authority("[::1]x"));
  EXPECT_FALSE(split_authority(":80"));
}

TEST(PortNumber, AcceptsZeroToSixtyFiveThousandFiveHundredThirtyFive) {
  EXPECT_EQ(port_number("65535"), uint16_t{65535});
  EXPECT_EQ(port_number("080"), uint16_t{80});
  EXPECT_FALSE(port_number("65536"));
  EXPECT_FALSE(port_number(""));
  EXPECT_FALSE(port_number("8a"));
  EXPECT_FALSE(port_number("000080"));
}

}  // namespace
}  // namespace floodgate::resilience
