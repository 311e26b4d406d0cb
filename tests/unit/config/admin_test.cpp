// admin.token, admin.token_file and the rule that an admin listener off loopback needs one. No
// message may quote the token: diagnostics end up in logs, tickets and CI output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "config_test_support.h"
#include "floodgate/config/config.h"

namespace floodgate::config {
namespace {

using testing::dump;
using testing::load_with;
using testing::only;

constexpr std::string_view kToken = "0123456789abcdef";  // exactly the shortest allowed

LoadResult admin(std::string_view listen, std::optional<std::string_view> token_toml = {}) {
  std::string head = "[admin]\nlisten = \"" + std::string(listen) + "\"";
  if (token_toml) {
    head += "\ntoken = " + std::string(*token_toml);
  }
  return load_with(head);
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

TEST(ConfigAdmin, HasNoTokenByDefault) {
  const LoadResult r = load_with("");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config->admin.token, "");
}

TEST(ConfigAdmin, ReadsAToken) {
  const LoadResult r = admin("0.0.0.0:9901", quoted(kToken));
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->admin.token, kToken);
}

TEST(ConfigAdmin, AcceptsEveryLoopbackListenerWithoutAToken) {
  for (const char* listen : {"127.0.0.1:9901", "127.8.9.10:9901", "localhost:9901", "[::1]:9901",
                             "[::ffff:127.0.0.1]:9901"}) {
    const LoadResult r = admin(listen);
    EXPECT_TRUE(r.ok()) << listen << "\n" << dump(r);
  }
}

TEST(ConfigAdmin, RefusesANonLoopbackListenerWithoutATokenSayingHowToFixIt) {
  EXPECT_EQ(only(admin("0.0.0.0:9901")),
            "test.toml:2:1: error: admin.listen: \"0.0.0.0:9901\" is not a loopback address and "
            "admin.token is not set, so anyone who can reach it could change the configuration; "
            "set admin.token or admin.token_file (at least 16 characters, e.g. the output of "
            "\"openssl rand -hex 32\"), or listen on 127.0.0.1");
}

TEST(ConfigAdmin, RefusesEveryNonLoopbackAddressWithoutAToken) {
  for (const char* listen : {"10.0.0.5:9901", "128.0.0.1:9901", "[::]:9901", "[2001:db8::1]:9901",
                             "[::ffff:10.0.0.1]:9901", "[::2]:9901"}) {
    const LoadResult r = admin(listen);
    ASSERT_EQ(r.diagnostics.size(), 1u) << listen << "\n" << dump(r);
    EXPECT_EQ(r.diagnostics[0].path, "admin.listen") << listen;
  }
}

TEST(ConfigAdmin, AcceptsATokenOnALoopbackListenerToo) {
  EXPECT_TRUE(admin("127.0.0.1:9901", quoted(kToken)).ok());
}

TEST(ConfigAdmin, RejectsATokenOfFifteenCharacters) {
  EXPECT_EQ(only(admin("127.0.0.1:9901", quoted(kToken.substr(1)))),
            "test.toml:3:1: error: admin.token: the token is shorter than 16 characters; use a "
            "longer one, e.g. the output of \"openssl rand -hex 32\"");
}

TEST(ConfigAdmin, RejectsAnEmptyTokenExplainingHowToRunWithout) {
  EXPECT_EQ(only(admin("127.0.0.1:9901", "\"\"")),
            "test.toml:3:1: error: admin.token: the token is empty; set one of at least 16 "
            "characters, e.g. the output of \"openssl rand -hex 32\", or remove the key to run "
            "the admin listener without one on loopback");
}

TEST(ConfigAdmin, RejectsWhitespaceControlAndNonAsciiCharacters) {
  for (const char* token : {R"("0123456789 abcdef")", R"("0123456789abcdef\t")",
                            R"("0123456789\u0007abcdef")", R"("0123456789abcdéf")"}) {
    const LoadResult r = admin("127.0.0.1:9901", token);
    ASSERT_EQ(r.diagnostics.size(), 1u) << token << "\n" << dump(r);
    EXPECT_EQ(r.diagnostics[0].message,
              "the token contains a space, a control character or a non-ASCII character; it is "
              "sent in an Authorization header, so use visible ASCII characters only, e.g. the "
              "output of \"openssl rand -hex 32\"")
        << token;
  }
}

TEST(ConfigAdmin, RejectsATokenThatIsNotAString) {
  EXPECT_EQ(only(admin("127.0.0.1:9901", "1234567890123456789")),
            "test.toml:3:1: error: admin.token: expected a string, got an integer; e.g. token = "
            "\"<at least 16 visible ASCII characters>\"");
}

TEST(ConfigAdmin, NeverQuotesTheTokenInAMessage) {
  for (const char* secret : {"hunter2", "hunter2 hunter2 hunter2", "", "1234567890123456789"}) {
    const bool is_number = std::string_view(secret) == "1234567890123456789";
    const LoadResult r = admin("0.0.0.0:9901", is_number ? secret : quoted(secret));
    ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
    EXPECT_EQ(r.diagnostics[0].path, "admin.token");
    if (*secret != '\0') {
      EXPECT_EQ(r.diagnostics[0].message.find(secret), std::string::npos) << dump(r);
    }
  }
}

TEST(ConfigAdmin, ReportsOnlyTheTokenWhenAnInvalidOneGuardsANonLoopbackListener) {
  const LoadResult r = admin("0.0.0.0:9901", "\"short\"");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "admin.token");
}

TEST(ConfigAdmin, ReadsAUnixSocketListenerWithItsModeAndNeedsNoToken) {
  const LoadResult r =
      load_with("[admin]\nlisten = \"unix:/run/floodgate/admin.sock\"\nsocket_mode = \"0600\"");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->admin.unix_path, "/run/floodgate/admin.sock");
  EXPECT_EQ(r.config->admin.listen.text, "unix:/run/floodgate/admin.sock");
  EXPECT_EQ(r.config->admin.socket_mode, 0600U);
  EXPECT_EQ(load_with("[admin]\nlisten = \"unix:/a.sock\"").config->admin.socket_mode, 0660U);
}

TEST(ConfigAdmin, RefusesARelativeOrOverlongSocketPath) {
  EXPECT_EQ(only(load_with("[admin]\nlisten = \"unix:admin.sock\"")),
            "test.toml:2:1: error: admin.listen: a UNIX socket needs an absolute path, e.g. "
            "\"unix:/run/floodgate/admin.sock\"");
  EXPECT_EQ(only(load_with("[admin]\nlisten = \"unix:/" + std::string(107, 'a') + "\"")),
            "test.toml:2:1: error: admin.listen: the socket path is longer than 107 bytes (the "
            "system's limit); choose a shorter one");
}

TEST(ConfigAdmin, RefusesABadSocketModeOrOneWithoutASocket) {
  EXPECT_EQ(only(load_with("[admin]\nlisten = \"unix:/a.sock\"\nsocket_mode = \"0860\"")),
            "test.toml:3:1: error: admin.socket_mode: must be a file mode in octal, e.g. \"0660\" "
            "(owner and group may connect) or \"0600\"");
  EXPECT_EQ(only(load_with("[admin]\nsocket_mode = \"0660\"")),
            "test.toml:2:1: error: admin.socket_mode: applies to an admin listener on a UNIX "
            "socket (listen = \"unix:/path\"); remove it, or move the listener to a socket");
}

TEST(ConfigAdmin, ListsTokenAmongTheAdminKeys) {
  EXPECT_EQ(only(load_with("[admin]\ntokne = \"x\"")),
            "test.toml:2:1: error: admin.tokne: unknown key 'tokne' in [admin] (did you mean "
            "'token'?); expected one of: listen, socket_mode, token, token_file");
}

// A token file in a fresh directory, removed with it.
class TokenFile {
 public:
  explicit TokenFile(std::string_view content) {
    std::string dir = ::testing::TempDir() + "floodgate-token-XXXXXX";
    EXPECT_NE(::mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    path_ = dir_ + "/admin-token";
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TokenFile() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

LoadResult admin_with_file(std::string_view listen, const std::string& path) {
  return load_with("[admin]\nlisten = \"" + std::string(listen) + "\"\ntoken_file = \"" + path +
                   "\"");
}

TEST(ConfigAdmin, ReadsTheTokenFromAFileWithoutItsTrailingNewline) {
  const TokenFile f(std::string(kToken) + " \r\n\n");
  const LoadResult r = admin_with_file("0.0.0.0:9901", f.path());
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << dump(r);
  EXPECT_EQ(r.config->admin.token, kToken);
}

TEST(ConfigAdmin, RefusesATokenAndATokenFileTogether) {
  const TokenFile f(kToken);
  const LoadResult r = load_with("[admin]\ntoken = \"" + std::string(kToken) +
                                 "\"\ntoken_file = \"" + f.path() + "\"");
  EXPECT_EQ(only(r),
            "test.toml:3:1: error: admin.token_file: admin.token and admin.token_file are both "
            "set; keep one (token_file keeps the secret out of the configuration file)");
}

TEST(ConfigAdmin, AMissingTokenFileIsAnErrorNamingTheFileAndTheReason) {
  const LoadResult r = admin_with_file("127.0.0.1:9901", "/nonexistent/floodgate/admin-token");
  EXPECT_EQ(only(r),
            "test.toml:3:1: error: admin.token_file: cannot read "
            "\"/nonexistent/floodgate/admin-token\": No such file or directory");
}

TEST(ConfigAdmin, ATokenFileMustBeAnAbsolutePath) {
  const LoadResult r = admin_with_file("127.0.0.1:9901", "admin-token");
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "admin.token_file");
  EXPECT_NE(r.diagnostics[0].message.find("must be an absolute path"), std::string::npos)
      << dump(r);
}

TEST(ConfigAdmin, AnInvalidTokenInAFileIsReportedWithoutQuotingIt) {
  for (const char* secret : {"hunter2", "hunter2 hunter2 hunter2", ""}) {
    const TokenFile f(std::string(secret) + "\n");
    const LoadResult r = admin_with_file("0.0.0.0:9901", f.path());
    ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
    EXPECT_EQ(r.diagnostics[0].path, "admin.token_file");
    EXPECT_NE(r.diagnostics[0].message.find(f.path()), std::string::npos) << dump(r);
    if (*secret != '\0') {
      EXPECT_EQ(r.diagnostics[0].message.find(secret), std::string::npos) << dump(r);
    }
  }
}

TEST(ConfigAdmin, ATokenFileLargerThan4KiBIsRefused) {
  const TokenFile f(std::string(5000, 'a'));
  const LoadResult r = admin_with_file("127.0.0.1:9901", f.path());
  ASSERT_EQ(r.diagnostics.size(), 1u) << dump(r);
  EXPECT_NE(r.diagnostics[0].message.find("larger than 4096 bytes"), std::string::npos) << dump(r);
}

}  // namespace
}  // namespace floodgate::config
