#pragma once
// smol's optional model download from the Hugging Face Hub: resolve `-hf owner/repo[:quant]`
// to a cached file, downloading it (resumable, SHA-256 checked) when missing. Link the CMake
// target smol::hub, which adds OpenSSL and cpp-httplib to smol::smol.

#include "smol/hub/download.hpp"
#include "smol/hub/model_source.hpp"
#include "smol/smol.hpp"
