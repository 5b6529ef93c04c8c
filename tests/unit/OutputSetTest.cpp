//===- OutputSetTest.cpp - Output sets, staged files, progress ------------===//
//
// Unit tests of the output writer: publishing a set, refusing non-regular
// destinations, following symlinks, removing stale files and stale staging
// folders, write-through devices, error messages, the progress bar.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "support/OutputSet.h"
#include "support/Progress.h"
#include "support/StagedFile.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace archc;
namespace fs = std::filesystem;

namespace {
struct Diags {
  SourceMgr sm;
  DiagnosticEngine engine{sm};
  Diags() {
    engine.setCapture(true);
    engine.setErrorLimit(0);
  }
  std::string text() {
    std::string s;
    for (const Diagnostic &d : engine.getCaptured())
      s += engine.render(d);
    return s;
  }
};

bool stageText(OutputSet &set, const std::string &rel, const std::string &text,
               DiagnosticEngine &diags) {
  StagedFile f;
  return f.open(set.stage(rel), set.finalPath(rel), diags) &&
         f.write(text.data(), text.size(), diags) && f.close(diags);
}

std::string readAll(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> hidden(const fs::path &dir) {
  std::vector<std::string> names;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(".archc-", 0) == 0)
      names.push_back(e.path().filename().string());
  return names;
}
} // namespace

TEST(OutputSet, PublishesEveryStagedFileAndRemovesTheStagingFolder) {
  test::ScratchDir dir;
  Diags d;
  OutputSet set;
  fs::path out = dir.path / "a" / "b"; // created with its parents
  ASSERT_TRUE(set.begin(out.string(), d.engine)) << d.text();
  ASSERT_TRUE(stageText(set, "onnx/model.onnx_data", "data", d.engine));
  ASSERT_TRUE(stageText(set, "onnx/model.onnx", "model", d.engine));
  ASSERT_TRUE(stageText(set, "config.json", "{}", d.engine));
  EXPECT_FALSE(fs::exists(out / "onnx" / "model.onnx")); // not yet
  ASSERT_TRUE(set.publish(d.engine)) << d.text();
  EXPECT_EQ(readAll(out / "onnx" / "model.onnx"), "model");
  EXPECT_EQ(readAll(out / "onnx" / "model.onnx_data"), "data");
  EXPECT_EQ(readAll(out / "config.json"), "{}");
  EXPECT_TRUE(hidden(out).empty());
}

TEST(OutputSet, RefusesAFifoDestinationAndPublishesNothing) {
  test::ScratchDir dir;
  Diags d;
  ASSERT_EQ(mkfifo((dir.path / "genai_config.json").c_str(), 0644), 0);
  OutputSet set;
  ASSERT_TRUE(set.begin(dir.path.string(), d.engine));
  ASSERT_TRUE(stageText(set, "model.onnx", "model", d.engine));
  ASSERT_TRUE(stageText(set, "genai_config.json", "{}", d.engine));
  EXPECT_FALSE(set.publish(d.engine));
  EXPECT_NE(d.text().find("genai_config.json': it is a FIFO; archc does not "
                          "replace it"),
            std::string::npos)
      << d.text();
  EXPECT_FALSE(fs::exists(dir.path / "model.onnx")); // all or nothing
  struct stat st;
  ASSERT_EQ(lstat((dir.path / "genai_config.json").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(hidden(dir.path).empty());
}

TEST(OutputSet, ReplacesASymlinksTargetAndKeepsTheLink) {
  test::ScratchDir dir;
  Diags d;
  fs::create_directories(dir.path / "store");
  dir.write("store/blob", "old");
  fs::create_symlink("store/blob", dir.path / "model.onnx");
  OutputSet set;
  ASSERT_TRUE(set.begin(dir.path.string(), d.engine));
  ASSERT_TRUE(stageText(set, "model.onnx", "new", d.engine));
  ASSERT_TRUE(set.publish(d.engine)) << d.text();
  EXPECT_TRUE(fs::is_symlink(dir.path / "model.onnx"));
  EXPECT_EQ(readAll(dir.path / "store" / "blob"), "new");
}

TEST(OutputSet, RemovesOnlyStaleFilesItDoesNotProduce) {
  test::ScratchDir dir;
  Diags d;
  dir.write("model.onnx_data", "x");
  dir.write("model.onnx_data_1", "x");
  dir.write("notes.txt", "mine");
  OutputSet set;
  ASSERT_TRUE(set.begin(dir.path.string(), d.engine));
  ASSERT_TRUE(stageText(set, "model.onnx_data", "new", d.engine));
  set.removeStale({""}, [](const std::string &rel) {
    return rel.rfind("model.onnx_data", 0) == 0;
  });
  ASSERT_TRUE(set.publish(d.engine)) << d.text();
  EXPECT_EQ(readAll(dir.path / "model.onnx_data"), "new");
  EXPECT_FALSE(fs::exists(dir.path / "model.onnx_data_1"));
  EXPECT_TRUE(fs::exists(dir.path / "notes.txt"));
}

TEST(OutputSet, StaleStagingFoldersGoOnlyWhenTheirOwnerIsGone) {
  test::ScratchDir dir;
  fs::create_directories(dir.path / ".archc-tmp-1-dead00" / "onnx");
  dir.write(".archc-tmp-1-dead00/onnx/model.onnx_data", "partial");
  fs::create_directories(dir.path / ".archc-tmp-2-live00");
  fs::create_directories(dir.path / ".archc-other"); // not a staging folder
  int fd = ::open((dir.path / ".archc-tmp-2-live00").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  EXPECT_EQ(removeStaleTempDirs(dir.path.string()), 1u);
  EXPECT_FALSE(fs::exists(dir.path / ".archc-tmp-1-dead00"));
  EXPECT_TRUE(fs::exists(dir.path / ".archc-tmp-2-live00"));
  EXPECT_TRUE(fs::exists(dir.path / ".archc-other"));
  ::close(fd);
  EXPECT_EQ(removeStaleTempDirs(dir.path.string()), 1u);
  // An unnamed one (killed before naming it): only once old and empty.
  fs::create_directories(dir.path / ".archc-new-abcdef");
  EXPECT_EQ(removeStaleTempDirs(dir.path.string()), 0u);
  fs::last_write_time(dir.path / ".archc-new-abcdef",
                      fs::file_time_type::clock::now() -
                          std::chrono::minutes(5));
  EXPECT_EQ(removeStaleTempDirs(dir.path.string()), 1u);
  EXPECT_FALSE(fs::exists(dir.path / ".archc-new-abcdef"));
}

TEST(OutputSet, DiscardLeavesNothing) {
  test::ScratchDir dir;
  Diags d;
  {
    OutputSet set;
    ASSERT_TRUE(set.begin(dir.path.string(), d.engine));
    ASSERT_TRUE(stageText(set, "model.onnx", "x", d.engine));
  } // an error path: never published
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(OutputSet, WriteOutputFile) {
  test::ScratchDir dir;
  Diags d;
  EXPECT_TRUE(writeOutputFile("/dev/null", "text", d.engine)) << d.text();
  struct stat st;
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  std::string p = (dir.path / "x" / "y.txt").string();
  EXPECT_TRUE(writeOutputFile(p, "hello", d.engine));
  EXPECT_EQ(readAll(p), "hello");
  EXPECT_FALSE(writeOutputFile("/dev/full", "text", d.engine));
  EXPECT_NE(d.text().find("cannot write '/dev/full': No space left on device"),
            std::string::npos)
      << d.text();
}

TEST(StagedFile, ErrorsNameTheShownPathAndTheReason) {
  Diags d;
  StagedFile f;
  ASSERT_TRUE(f.open("/dev/full", "out/model.onnx_data", d.engine));
  std::string big(1 << 16, 'x');
  bool ok = f.write(big.data(), big.size(), d.engine) && f.close(d.engine);
  EXPECT_FALSE(ok);
  EXPECT_NE(d.text().find("cannot write 'out/model.onnx_data': No space left "
                          "on device"),
            std::string::npos)
      << d.text();
}

TEST(Progress, RendersBytesRateAndTimeLeft) {
  std::string line = ProgressBar::render("binding weights", 512ull << 20,
                                         1ull << 30, 2.0, 100);
  EXPECT_NE(line.find("binding weights ["), std::string::npos) << line;
  EXPECT_NE(line.find(" 50% 512 MiB / 1.00 GiB 256 MiB/s ETA 0:02"),
            std::string::npos)
      << line;
  EXPECT_LE(line.size(), 99u);
  std::string done =
      ProgressBar::render("binding weights", 3ull << 30, 3ull << 30, 65, 80);
  EXPECT_NE(done.find("100% 3.00 GiB / 3.00 GiB"), std::string::npos) << done;
  EXPECT_NE(done.find(" 1:05"), std::string::npos) << done;
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
}

TEST(Progress, DrawsNothingWhenDisabled) {
  char *buf = nullptr;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  {
    ProgressBar bar("binding weights", 100, /*enabled=*/false, mem);
    bar.advance(50);
    bar.finish();
  }
  std::fclose(mem);
  EXPECT_EQ(len, 0u);
  std::free(buf);
  mem = open_memstream(&buf, &len);
  {
    ProgressBar bar("binding weights", 100, /*enabled=*/true, mem);
    bar.advance(100);
    bar.finish();
  }
  std::fclose(mem);
  EXPECT_NE(std::string(buf, len).find("100%"), std::string::npos);
  std::free(buf);
}
