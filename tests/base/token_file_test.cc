// read_token_file: the one rule every reader of a token file follows (first line, trailing white
// space and CR/LF removed; refuse empty, short and group/world-readable files, naming the file).
#include "sumcast/token_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace sumcast {
namespace {

class TokenFile : public ::testing::Test {
 protected:
  TokenFile() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sumcast-token-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    dir_ = pattern;
  }
  ~TokenFile() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Writes `content` to a file of mode `mode` and returns its path.
  std::string write(const std::string& content, mode_t mode = 0600) {
    const std::string path = (dir_ / ("token" + std::to_string(++files_))).string();
    {
      std::ofstream out(path, std::ios::binary);
      out << content;
    }
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }

  std::filesystem::path dir_;
  int files_ = 0;
};

constexpr const char* kToken = "0123456789abcdef0123";

TEST_F(TokenFile, EveryLineEndingGivesTheSameToken) {
  for (const std::string& content :
       {std::string(kToken) + "\n", std::string(kToken) + "\r\n", std::string(kToken), std::string(kToken) + "  \t\n",
        std::string(kToken) + " \r\nsecond line\n", std::string(kToken) + "\r"}) {
    SCOPED_TRACE(content);
    const Result<std::string> token = read_token_file(write(content));
    ASSERT_TRUE(token.ok()) << token.status().to_string();
    EXPECT_EQ(*token, kToken);
  }
}

TEST_F(TokenFile, LeadingAndInnerSpacesArePartOfTheToken) {
  const Result<std::string> token = read_token_file(write(" 0123456789 abcdef\n"));
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  EXPECT_EQ(*token, " 0123456789 abcdef");
}

TEST_F(TokenFile, EmptyFileIsRefusedNamingIt) {
  const std::string path = write("");
  const Result<std::string> token = read_token_file(path);
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(token.status().message(), path + " is empty; its first line must hold the token");
}

TEST_F(TokenFile, ShortTokenIsRefusedWithItsLength) {
  for (const auto& [content, bytes] : {std::pair<const char*, int>{"short\n", 5},
                                       {"\n", 0},
                                       {"   \r\n", 0},
                                       {"0123456789abcde\r\n0123456789abcdef\n", 15}}) {
    SCOPED_TRACE(content);
    const std::string path = write(content);
    const Result<std::string> token = read_token_file(path);
    ASSERT_FALSE(token.ok());
    EXPECT_EQ(token.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(token.status().message(),
              path + ": the first line (the token) has " + std::to_string(bytes) + " bytes; at least 16 are needed");
  }
}

TEST_F(TokenFile, FileOthersCanReadIsRefusedWithTheFix) {
  for (const mode_t mode : {0644, 0640, 0604, 0660}) {
    SCOPED_TRACE(mode);
    const std::string path = write(std::string(kToken) + "\n", mode);
    const Result<std::string> token = read_token_file(path);
    ASSERT_FALSE(token.ok());
    EXPECT_EQ(token.status().code(), StatusCode::kInvalidArgument);
    char shown[8];
    std::snprintf(shown, sizeof shown, "%04o", static_cast<unsigned>(mode));
    EXPECT_EQ(
        token.status().message(),
        path + " (mode " + shown + ") is open to its group or others; a token file must be private: chmod 600 " + path);
  }
  EXPECT_TRUE(read_token_file(write(std::string(kToken) + "\n", 0400)).ok());
}

TEST_F(TokenFile, MissingFileIsNotFoundAndADirectoryIsNoFile) {
  const std::string missing = (dir_ / "absent").string();
  Result<std::string> token = read_token_file(missing);
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(token.status().message(), missing + ": No such file or directory");
  token = read_token_file(dir_.string());
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), StatusCode::kIoError);
  EXPECT_EQ(token.status().message(), dir_.string() + " is not a regular file");
}

TEST_F(TokenFile, OverlongFirstLineIsNoTokenFile) {
  const std::string path = write(std::string(kMaxTokenFileLineBytes + 1, 'x') + "\n");
  const Result<std::string> token = read_token_file(path);
  ASSERT_FALSE(token.ok());
  EXPECT_NE(token.status().message().find(path + ": the first line is longer than 4096 bytes"), std::string::npos)
      << token.status().message();
  EXPECT_TRUE(read_token_file(write(std::string(kMaxTokenFileLineBytes, 'x') + "\n")).ok());
}

}  // namespace
}  // namespace sumcast
