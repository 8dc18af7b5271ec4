# -*- Python -*-
import os
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "MOEC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".moe", ".test"]
config.excludes = ["inputs", "unit", "package", "fuzz", "CMakeLists.txt",
                   "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moec_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
# Tests never touch the user's kernel cache.
config.environment["MOEC_CACHE_DIR"] = os.path.join(config.test_exec_root, "kernel-cache")

llvm_config.use_default_substitutions()
# `not` and `count` at the start of a command are found through PATH.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.moec_tools_dir, append_path=True)
config.substitutions.append(("%moec_src", config.moec_src_root))
config.substitutions.append(("%examples", os.path.join(config.moec_src_root, "examples")))

if config.moec_have_cuda_toolkit:
    config.available_features.add("nvrtc")
# nvcc (with a host compiler) checks that --emit cuda's file stands alone.
# Preprocessing an empty file for sm_90 runs the toolkit's host-compiler
# check, so a toolkit too old for the host's gcc (or for sm_90) skips the
# test instead of failing it.
def nvcc_works(nvcc):
    if not nvcc or not os.access(nvcc, os.X_OK):
        return False
    try:
        return subprocess.call([nvcc, "-std=c++17", "-arch=sm_90", "-E",
                                "-x", "cu", os.devnull], timeout=60,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


moec_nvcc = getattr(config, "moec_nvcc", "")
if nvcc_works(moec_nvcc):
    config.available_features.add("nvcc")
    config.substitutions.append(("%{nvcc}", moec_nvcc))

# bench/'s PyTorch peers run under Debian's python3 with python3-torch.
torch_python = "/usr/bin/python3"
def imports_torch(python):
    try:
        return subprocess.call([python, "-c", "import torch"], timeout=60,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


if imports_torch(torch_python):
    config.available_features.add("torch")
    config.substitutions.append(("%{torch_python}", torch_python))

llvm_config.add_tool_substitutions(["moec-opt", "moec-translate", "moec"],
                                   [config.moec_tools_dir, config.llvm_tools_dir])
