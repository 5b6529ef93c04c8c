//===- TestUtil.h - Helpers for archc unit tests ----------------*- C++ -*-===//
//
// Compiles .arch source and config text given as strings (written to a
// private temporary directory) and captures diagnostics.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_TESTS_TESTUTIL_H
#define ARCHC_TESTS_TESTUTIL_H

#include "driver/Compiler.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace archc::test {

/// A scratch directory removed at the end of the test.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "archc-test-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path = mkdtemp(buf.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string &name, const std::string &text) const {
    std::filesystem::path p = path / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

/// Result of compiling from strings.
struct Compiled {
  std::unique_ptr<Compilation> c;
  bool ok = false;
  /// All captured diagnostics rendered as text.
  std::string diagnostics() const {
    std::string s;
    for (const Diagnostic &d : c->diags->getCaptured())
      s += c->diags->render(d);
    return s;
  }
  ir::Module &module() const { return *c->module; }
};

inline Compiled compile(const ScratchDir &dir, const std::string &arch,
                        const std::string &config,
                        EmitTarget emit = EmitTarget::IR,
                        std::vector<std::string> passes = {"shape-inference"},
                        bool allowUnknownConfig = false) {
  Options opts;
  opts.allowUnknownConfig = allowUnknownConfig;
  opts.input = dir.write("test.arch", arch);
  opts.config = dir.write("config.json", config);
  opts.emit = emit;
  opts.passes = passes;
  Compiled r;
  r.c = std::make_unique<Compilation>();
  r.c->diags->setCapture(true);
  r.c->diags->setErrorLimit(0);
  std::ostringstream ir;
  r.ok = compileModule(opts, *r.c, ir);
  return r;
}

/// A small llama-like arch used by several tests.
inline const char *kTinyArch = R"(
import "std/attention.arch"
arch tiny matches "TinyForCausalLM" {
  config {
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int = num_attention_heads
    head_dim: int = hidden_size / num_attention_heads
    intermediate_size: int = 4 * hidden_size
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
  }
  model(input_ids: i64[batch, seq], position_ids: i64[batch, seq]) -> (logits) {
    embed = param("weight", [vocab_size, hidden_size]) @ "model.embed_tokens"
    x = op.gather(embed, input_ids)
    for i in 0 .. num_hidden_layers @ "model.layers.{i}" {
      h = rms_norm(x, hidden_size, rms_norm_eps) @ "input_layernorm"
      x += attention(h, position_ids, hidden_size, num_attention_heads,
                     num_key_value_heads, head_dim, rope_theta) @ "self_attn"
      h = rms_norm(x, hidden_size, rms_norm_eps) @ "post_attention_layernorm"
      x += gated_mlp(h, hidden_size, intermediate_size) @ "mlp"
    }
    x = rms_norm(x, hidden_size, rms_norm_eps) @ "model.norm"
    logits = op.matmul(x, param("weight", [vocab_size, hidden_size]) @ "lm_head", transpose_b: true)
  }
}
)";

inline const char *kTinyConfig = R"({
  "architectures": ["TinyForCausalLM"],
  "vocab_size": 32, "hidden_size": 16, "num_hidden_layers": 3,
  "num_attention_heads": 4, "num_key_value_heads": 2
})";

} // namespace archc::test

#endif // ARCHC_TESTS_TESTUTIL_H
