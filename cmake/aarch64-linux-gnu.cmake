# Cross-compiling smol for 64-bit ARM Linux with Debian's cross toolchain (package
# g++-aarch64-linux-gnu):
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake ...
# The build targets Armv8.0, so it runs on every AArch64 core; the dotprod set is compiled per
# function and chosen at run time (core/simd_targets.hpp). Programs built this way run on an x86
# host under qemu-user (package qemu-user-static), which CMake's tests use through
# CMAKE_CROSSCOMPILING_EMULATOR; SMOL_QEMU_CPU picks the emulated core (max, cortex-a76, cortex-a53).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(SMOL_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${SMOL_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${SMOL_CROSS_TRIPLE}-g++)

# Libraries and their CMake packages from the target's tree only; the header-only dependencies
# (nlohmann-json, doctest) are the same for every architecture, so the host's /usr is searched too.
set(CMAKE_FIND_ROOT_PATH /usr/${SMOL_CROSS_TRIPLE} /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

if(NOT DEFINED SMOL_QEMU_CPU)
  set(SMOL_QEMU_CPU max)
endif()
find_program(SMOL_QEMU_AARCH64 qemu-aarch64-static)
if(SMOL_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SMOL_QEMU_AARCH64} -L /usr/${SMOL_CROSS_TRIPLE} -cpu ${SMOL_QEMU_CPU})
endif()
