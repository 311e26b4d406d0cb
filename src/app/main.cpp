#include <cstdio>

#include "app.h"
#include "check.h"
#include "cli.h"

int main(int argc, char** argv) {
  using floodgate::app::Options;
  const Options opts = floodgate::app::parse_options(argc, argv);
  switch (opts.command) {
    case Options::Command::version:
      std::fputs(floodgate::app::version_text().c_str(), stdout);
      return 0;
    case Options::Command::help:
      std::fputs(floodgate::app::usage(), stdout);
      return 0;
    case Options::Command::usage_error:
      std::fprintf(stderr, "floodgate: %s\n\n%s", opts.error.c_str(), floodgate::app::usage());
      return 1;
    case Options::Command::check:
      return floodgate::app::check(opts.config_path, opts.format, opts.bind_test);
    case Options::Command::run:
      break;
  }
  return floodgate::app::run(opts.config_path);
}
