// argen_characterize end to end on the tiny Janus-layout checkpoint
// (tests/goldens/tiny/tiny-mha: 2 layers, 4 heads, 8x8 = 64 image tokens).
// Known answers: every query's weights sum to 1 (so the three masses of each
// head sum to 1), 63 decode queries per prompt (the last image token is never
// fed back), so the pairs at distance d are heads x prompts x (63 - d).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

std::vector<std::vector<std::string>> ReadCsv(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

TEST(CharacterizeDriver, TinyCheckpointEndToEnd) {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  const std::string dir = ::testing::TempDir() + "/characterize_driver";
  const std::string prompts = ::testing::TempDir() + "/characterize_prompts.txt";
  {
    std::ofstream p(prompts);
    p << "a red apple on a wooden table\n\nthree blue cubes\n";
  }
  const std::string cmd = std::string(ARGEN_CHARACTERIZE_BIN) + " --model_dir=" + src +
                          "/tests/goldens/tiny/tiny-mha --prompts=" + prompts + " --out=" + dir +
                          " --layer=1 --head=2 --max_distance=6 --threads=1 > " + dir + ".log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  const auto mass = ReadCsv(dir + "/mass.csv");
  ASSERT_EQ(mass[0], (std::vector<std::string>{"scope", "layer", "head", "prompt", "local", "middle"}));
  int heads = 0;
  for (size_t i = 1; i < mass.size(); ++i) {
    ASSERT_EQ(mass[i].size(), 6u);
    const double total = std::stod(mass[i][3]) + std::stod(mass[i][4]) + std::stod(mass[i][5]);
    EXPECT_NEAR(total, 1.0, 1e-4) << "row " << i;
    EXPECT_GT(std::stod(mass[i][3]), 0.0);  // the prompt always gets some weight
    heads += mass[i][0] == "head";
  }
  EXPECT_EQ(heads, 2 * 4);

  const auto sim = ReadCsv(dir + "/similarity.csv");
  int checked = 0;
  for (size_t i = 1; i < sim.size(); ++i) {
    const int layer = std::stoi(sim[i][1]), d = std::stoi(sim[i][2]);
    const long pairs = std::stol(sim[i][5]);
    const int heads_in_scope = layer < 0 ? 8 : 4;
    EXPECT_EQ(pairs, heads_in_scope * 2 * (63 - d)) << "layer " << layer << " d " << d;
    for (int c : {3, 4}) {
      const double v = std::stod(sim[i][c]);
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 1.0 + 1e-9);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 3 * 6);  // all + 2 layers, d = 1..6

  const auto loc = ReadCsv(dir + "/locality.csv");
  ASSERT_EQ(loc.size(), 1u + 8u);
  for (size_t i = 1; i < loc.size(); ++i) {
    const double s = std::stod(loc[i][2]);
    EXPECT_GE(s, 0.0);
    EXPECT_LE(s, 1.0);
    EXPECT_EQ(loc[i][4], s < 0.45 ? "local" : "semantic");
  }

  // Heatmaps: one per prompt, (L_p + 64) x 63 pixels; read the PNG IHDR.
  for (int p = 0; p < 2; ++p) {
    std::ifstream png(dir + "/heatmap_p" + std::to_string(p) + "_L1_H2.png", std::ios::binary);
    ASSERT_TRUE(png.good()) << p;
    unsigned char h[24];
    png.read(reinterpret_cast<char*>(h), 24);
    ASSERT_EQ(std::string(reinterpret_cast<char*>(h + 1), 3), "PNG");
    const unsigned width = (h[16] << 24) | (h[17] << 16) | (h[18] << 8) | h[19];
    const unsigned height = (h[20] << 24) | (h[21] << 16) | (h[22] << 8) | h[23];
    EXPECT_EQ(height, 63u);
    EXPECT_GT(width, 64u);
    EXPECT_LT(width, 64u + 64u);  // prompt of a short caption
  }

  // Under sliding_window with n_att = 1 each query attends the prompt and
  // itself only: no middle mass anywhere, and the heatmap shows it.
  const std::string dir1 = dir + "_window1";
  const std::string cmd1 = std::string(ARGEN_CHARACTERIZE_BIN) + " --model_dir=" + src +
                           "/tests/goldens/tiny/tiny-mha --prompts=" + prompts + " --out=" + dir1 +
                           " --policy=sliding_window --n_att=1 --max_distance=3 > " + dir1 + ".log 2>&1";
  ASSERT_EQ(std::system(cmd1.c_str()), 0) << cmd1;
  const auto mass1 = ReadCsv(dir1 + "/mass.csv");
  ASSERT_EQ(mass1.size(), mass.size());
  for (size_t i = 1; i < mass1.size(); ++i) {
    EXPECT_NEAR(std::stod(mass1[i][5]), 0.0, 1e-9) << "row " << i;
    EXPECT_NEAR(std::stod(mass1[i][3]) + std::stod(mass1[i][4]), 1.0, 1e-4) << "row " << i;
  }

  // Bad input is reported, not crashed on.
  EXPECT_NE(std::system((std::string(ARGEN_CHARACTERIZE_BIN) + " --model_dir=/nonexistent --prompts=" + prompts +
                         " --out=" + dir + " > /dev/null 2>&1")
                            .c_str()),
            0);
  EXPECT_NE(std::system((std::string(ARGEN_CHARACTERIZE_BIN) + " --model_dir=" + src +
                         "/tests/goldens/tiny/tiny-mha --prompts=" + prompts + " --out=" + dir +
                         " --layer=7 > /dev/null 2>&1")
                            .c_str()),
            0);
  EXPECT_NE(std::system((std::string(ARGEN_CHARACTERIZE_BIN) + " --bogus=1 > /dev/null 2>&1").c_str()), 0);
  EXPECT_NE(std::system((std::string(ARGEN_CHARACTERIZE_BIN) + " --model_dir=" + src +
                         "/tests/goldens/tiny/tiny-mha --prompts=" + prompts + " --out=" + dir +
                         " --policy=diagonal --sparsity=1.5 > /dev/null 2>&1")
                            .c_str()),
            0);
}

// The wave-3 code models: Anole (Meta layout, 32 x 32 codes) and LlamaGen
// c2i (a class model: prompt p draws class p) characterize end to end; each
// head's attention mass splits over prompt, local and middle keys.
TEST(CharacterizeDriver, AnoleAndLlamaGenClassModel) {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  const std::string prompts = ::testing::TempDir() + "/characterize_family_prompts.txt";
  {
    std::ofstream p(prompts);
    p << "a red cube\nthree dogs\n";
  }
  for (const std::string model : {"tiny-anole-meta", "tiny-llamagen-c2i"}) {
    const std::string dir = ::testing::TempDir() + "/characterize_" + model;
    const std::string cmd = std::string(ARGEN_CHARACTERIZE_BIN) + " --model_dir=" + src + "/tests/goldens/tiny/" +
                            model + " --prompts=" + prompts + " --out=" + dir + " --threads=1 > " + dir + ".log 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const auto mass = ReadCsv(dir + "/mass.csv");
    ASSERT_GT(mass.size(), 1u) << model;
    for (size_t i = 1; i < mass.size(); ++i) {
      ASSERT_EQ(mass[i].size(), 6u) << model;
      const double total = std::stod(mass[i][3]) + std::stod(mass[i][4]) + std::stod(mass[i][5]);
      EXPECT_NEAR(total, 1.0, 1e-4) << model << " row " << i;
    }
  }
}

}  // namespace
