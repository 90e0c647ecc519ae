// Offline cuBLASLt heuristic tables: for each GEMM kind of a GPU, the answer
// cublasLtMatmulAlgoGetHeuristic gives (its top algorithm, SPLITK_NUM,
// REDUCTION_SCHEME) on a dense grid of shapes, and the kernel each distinct
// algorithm configuration launched. Generated on the GPU by
// sim/accumulation/fit/cublas_heuristic_table.py from the shape list
// sim/accumulation/tables/cublas-shapes.json; a preset (cublas:h100) reads its
// GPU's table, cublas-<gpu>.txt, and falls back to its measured-grid guess
// where there is none (kernel_preset_source says which).
//
// The file (text, version 1):
//   rpsim-cublas-table 1
//   gpu NAME...            library NAME VERSION      spec FILE sha256 HEX
//   config I algo=A tile=T stages=S custom=C kernel=NAME   (one per configuration)
//   kind IN:OUT            (then its axes and rows; several kinds a file)
//   m V V ...   n V V ...   k V V ...
//   one line per (m, n), m-major: per k the entry CONFIG.SPLITK.REDUCTION
//   (SPLITK 0: cuBLASLt had no algorithm; 4294967295, the uint32 of -1: a
//   split chosen at run time, kept as no count; at most 32768 configurations,
//   4094 slices and REDUCTION 31), a run of equal entries written ENTRY*COUNT
//   end
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/accumulation/cublas_record.hpp"

namespace rpsim::sim {

class CublasTable {
 public:
  struct Config {
    int algo_id = 0, tile_id = 0, stages_id = 0, custom_option = 0;
    std::string kernel;
  };
  // Throws std::invalid_argument naming the file, the line and what is wrong.
  static CublasTable read(const std::filesystem::path& file);

  std::filesystem::path file;
  std::string gpu, library;
  std::vector<Config> configs;

  // The record at the grid point nearest M x N x K in log2 (K among values of
  // its own 8-alignment when the grid has them), for a kind "fp16:fp32";
  // none when the table has no such kind or cuBLASLt had no algorithm there.
  // exact: the shape is a grid point.
  std::optional<CublasRecord> lookup(std::string_view kind, long m, long n, long k,
                                     bool* exact = nullptr) const;
  std::vector<std::string> kinds() const;
  std::size_t entries() const;

 private:
  struct Kind {
    std::vector<long> m, n, k;
    std::vector<std::uint32_t> cells;  // config << 17 | splitk << 5 | reduction, [m][n][k]
  };
  std::map<std::string, Kind, std::less<>> kinds_;
};

// Where a GPU preset's table lives: $RPSIM_CUBLAS_TABLES/cublas-<gpu>.txt, else
// the source tree's sim/accumulation/tables/cublas-<gpu>.txt.
std::filesystem::path cublas_table_path(std::string_view gpu);
// That table, read once per path; nullptr when the file does not exist (a
// malformed one throws std::invalid_argument).
const CublasTable* cublas_table(std::string_view gpu);

}  // namespace rpsim::sim
