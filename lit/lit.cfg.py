# -*- Python -*-
# lit configuration for archc's golden tests (see docs/testing.md).
import os
import lit.formats

config.name = "archc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".arch", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in", "check_profile_json.py", "check_plot.py", "extract_example.py", "extract_op_reference.py"]
config.test_source_root = os.path.dirname(__file__)
archc_bin_dir = getattr(config, "archc_bin_dir", None) or lit_config.params.get("archc_bin_dir")
llvm_tools_dir = getattr(config, "llvm_tools_dir", None) or "/usr/lib/llvm-14/bin"
config.test_exec_root = getattr(config, "archc_obj_root", None) or os.path.join(config.test_source_root, "Output")
if not archc_bin_dir:
    lit_config.fatal("archc_bin_dir unknown: run lit on the build dir or pass --param archc_bin_dir=...")
for tool in ("FileCheck", "not", "count"):
    if not os.path.exists(os.path.join(llvm_tools_dir, tool)):
        lit_config.fatal("missing LLVM test tool: " + os.path.join(llvm_tools_dir, tool))
src_root = getattr(config, "archc_src_root", os.path.dirname(config.test_source_root))
config.environment["PATH"] = os.pathsep.join([archc_bin_dir, llvm_tools_dir, os.environ["PATH"]])
config.substitutions.append(("%archc", os.path.join(archc_bin_dir, "archc")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%archs", os.path.join(src_root, "archs")))
config.substitutions.append(("%configs", os.path.join(src_root, "archs", "configs")))
# A run that must fail with archc's error exit code, exactly 1.
config.substitutions.append(("%exit1", ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3") + " " + os.path.join(config.test_source_root, "Inputs", "exit_code.py") + " 1"))
config.substitutions.append(("%python", "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else getattr(config, "python_executable", "python3")))
config.excludes.append("Inputs")
# The AST snapshot of the bundled files (docs/decisions.md): used unless the
# site config or `--param ast_snapshot=off` disables it; tests of the
# snapshot itself REQUIRE ast-snapshot.
ast_snapshot = lit_config.params.get("ast_snapshot") or getattr(config, "archc_ast_snapshot", "on")
if ast_snapshot == "off":
    config.environment["ARCHC_AST_SNAPSHOT"] = "off"
else:
    config.available_features.add("ast-snapshot")
# archc built with ASan/UBSan: its peak memory is the sanitizers' (shadow memory,
# quarantine), so tests of memory bounds are UNSUPPORTED there.
if getattr(config, "archc_sanitized", "off") == "on":
    config.available_features.add("sanitizer")
import shutil
if shutil.which("rsvg-convert"):
    config.available_features.add("rsvg-convert")
