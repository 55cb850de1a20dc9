#!/usr/bin/env bash
# arclight's decoder against a plain PyTorch forward of transformers' modeling code (Debian's python3-torch): tiny
# random Llama, Qwen2, Qwen3, Mistral, Gemma 1, 2 and 3 models made by hf_reference.py, checked by hf_reference_check.
# usage: hf_reference_test.sh CHECKER SOURCE_DIR
set -euo pipefail
checker=$1 source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$source_dir/tests/model/hf_reference.py" "$work"
"$checker" "$work/llama" "$work/qwen2" "$work/qwen3" "$work/mistral" "$work/gemma2" "$work/gemma3" "$work/gemma3_multimodal" "$work/gemma"
