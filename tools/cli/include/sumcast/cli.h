// Command lines of Sumcast's programs, on CLI11: every program gets --help (-h) and --version,
// and a usage error prints "PROGRAM: what is wrong (the option's name)" and "run PROGRAM --help"
// on stderr and exits 2. Use:
//
//   CLI::App app{"what the program does", "sumcast-serve"};
//   sumcast::cli::setup(app);
//   app.add_option("--bind", ip, "...")->required();
//   if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

namespace sumcast::cli {

inline constexpr int kExitUsage = 2;

// The version every program prints (the project's).
inline const char* version() { return SUMCAST_CLI_VERSION; }

// --version, and help that lists defaults.
inline void setup(CLI::App& app) {
  app.set_version_flag("--version", std::string(app.get_name()) + " " + version(), "print the version and exit");
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);
}

// Parses argv. Returns -1 to go on, else the exit status: 0 after --help/--version (printed on
// stdout), kExitUsage after a usage error (printed on stderr).
inline int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::printf("%s\n", app.version().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nrun %s --help for the options\n", app.get_name().c_str(), e.what(),
                 app.get_name().c_str());
    return kExitUsage;
  }
  return -1;
}

}  // namespace sumcast::cli
