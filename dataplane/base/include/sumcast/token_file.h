// The one reader of token files: the appliance, its config check, the worker library's front ends
// (NCCL plugin, MPI interposer, sumcast-allreduce, sumcast-serve) and the tools all read the shared
// secret through read_token_file(), so a file that authenticates with one authenticates with all.
//
// The rule: the token is the file's first line with its trailing white space (spaces, tabs, CR,
// LF) removed, so a file written by `echo`, by a Windows editor (CRLF) or without a final newline
// gives the same token. The file must be a regular file that neither its group nor others can
// read (it is a secret), and the token must hold at least kMinTokenBytes bytes. Every refusal is a
// Status whose message starts with the file's path and says what to change.
//
// Thread safety: a pure function of the file's contents.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "sumcast/status.h"

namespace sumcast {

// A shorter secret is too easy to guess for a service that answers anyone on its network.
inline constexpr size_t kMinTokenBytes = 16;
// Longer than any token the control protocol carries (256 bytes); more is not a token file.
inline constexpr size_t kMaxTokenFileLineBytes = 4096;

// The token held by `path` (see above), or a Status naming the file: NotFound when it does not
// exist, IoError when it cannot be opened or read or is not a regular file, InvalidArgument when
// it is readable by group or others, is empty, or its token is too short.
inline Result<std::string> read_token_file(const std::string& path) {
  if (path.empty()) return Status::invalid_argument("no token file named");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError, path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::io_error(path + " is not a regular file");
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::invalid_argument(
        path + " (mode " + mode + ") is open to its group or others; a token file must be private: chmod 600 " + path);
  }
  std::string line;
  char buffer[256];
  bool done = false;
  bool any = false;
  while (!done && line.size() <= kMaxTokenFileLineBytes) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::io_error(path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    any = true;
    const std::string_view chunk(buffer, static_cast<size_t>(n));
    const size_t newline = chunk.find('\n');
    line.append(chunk.substr(0, newline));
    done = newline != std::string_view::npos;
  }
  ::close(fd);
  if (line.size() > kMaxTokenFileLineBytes) {
    return Status::invalid_argument(path + ": the first line is longer than " + std::to_string(kMaxTokenFileLineBytes) +
                                    " bytes; it is not a token file");
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.pop_back();
  if (!any) return Status::invalid_argument(path + " is empty; its first line must hold the token");
  if (line.size() < kMinTokenBytes) {
    return Status::invalid_argument(path + ": the first line (the token) has " + std::to_string(line.size()) +
                                    " bytes; at least " + std::to_string(kMinTokenBytes) + " are needed");
  }
  return line;
}

}  // namespace sumcast
