"""Exports of a local sentence-transformers model for the non-PyTorch embedding backends, made
from the model folder's own weights (never a hub download):

- `export_onnx`: the transformer as an ONNX graph, fp32, dynamic batch and sequence axes, with
  inputs `input_ids`, `attention_mask`, `token_type_ids` and output `last_hidden_state` (pooling
  and normalisation stay outside the graph, in `backends`);
- `optimise_onnx`: that graph with ONNX Runtime's transformer fusions (attention, skip layer
  norm, bias GELU), exact GELU kept, so the vectors stay those of the fp32 model;
- `quantise_onnx`: the optimised graph with int8 weights (per channel, 7-bit range, so AVX2 and
  AVX-512 CPUs without VNNI do not saturate) and activations quantised per batch;
- `openvino_from_onnx` and `quantise_openvino`: the fp32 graph as OpenVINO IR, and as int8 IR
  calibrated by NNCF on real incident texts (`calibration_texts`).

Every function writes only its target path; the caller owns the folder and its atomic publication.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedding.models import offline

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"
ONNX_OPSET = 17
CALIBRATION_FILE = Path(__file__).resolve().parent / "calibration" / "gitbugs_hadoop.json"


def calibration_texts() -> list[str]:
    """The bundled calibration texts: body and title texts of 120 real Apache Hadoop bug reports
    (GitBugs, CC BY 4.0; the file names its source), as curation embeds them."""
    document = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    return [str(text) for text in document["texts"]]


def export_onnx(model_path: Path, target: Path) -> None:
    """Write the transformer of the sentence-transformers model in `model_path` to `target` as an
    fp32 ONNX graph (see the module docstring for its inputs and output). Needs torch and
    transformers; reads only local files."""
    offline()
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_path), local_files_only=True, attn_implementation="eager")
    model.eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, return_dict=True).last_hidden_state

    # A padded sample, so the traced graph keeps the attention mask's path.
    input_ids = torch.tensor([[101, 7592, 2088, 102, 0, 0], [101, 7592, 2088, 2003, 2307, 102]], dtype=torch.long)
    attention_mask = (input_ids != 0).long()
    token_type_ids = torch.zeros_like(input_ids)
    axes = {name: {0: "batch", 1: "sequence"} for name in (*INPUT_NAMES, OUTPUT_NAME)}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(model),
            (input_ids, attention_mask, token_type_ids),
            str(target),
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes,
            opset_version=ONNX_OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def _transformer_shape(model_path: Path) -> tuple[int, int]:
    config = json.loads((model_path / "config.json").read_text(encoding="utf-8"))
    return int(config["num_attention_heads"]), int(config["hidden_size"])


def optimise_onnx(model_path: Path, source: Path, target: Path) -> dict[str, int]:
    """Write `source` (from `export_onnx`) to `target` with ONNX Runtime's BERT fusions; returns
    the fused operators' counts. The result runs on ONNX Runtime's CPU provider only (it uses
    its contrib operators)."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    heads, hidden = _transformer_shape(model_path)
    options = FusionOptions("bert")
    options.enable_gelu_approximation = False
    optimised = optimize_model(str(source), model_type="bert", num_heads=heads, hidden_size=hidden, optimization_options=options, opt_level=0, use_gpu=False)
    optimised.save_model_to_file(str(target))
    return {name: int(count) for name, count in optimised.get_fused_operator_statistics().items() if count}


def quantise_onnx(source: Path, target: Path) -> None:
    """Write `source` (an fp32 or optimised graph) to `target` with int8 weights on its MatMul and
    Attention operators (per output channel, 7-bit, so CPUs without VNNI do not saturate) and
    their activations quantised per batch at run time. Embeddings and layer norms stay fp32."""
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Shape inference does not type the fused contrib operators' outputs: they are float.
    quantize_dynamic(
        str(source),
        str(target),
        op_types_to_quantize=["MatMul", "Attention"],
        per_channel=True,
        reduce_range=True,
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": TensorProto.FLOAT},
    )


def openvino_from_onnx(source: Path, target: Path) -> None:
    """Write the fp32 ONNX graph `source` to `target` (an `.xml`, with its `.bin` beside it) as
    OpenVINO IR, weights kept in fp32."""
    import openvino as ov

    ov.save_model(ov.Core().read_model(str(source)), str(target), compress_to_fp16=False)


def quantise_openvino(source: Path, target: Path, samples: Sequence[dict[str, np.ndarray[Any, Any]]]) -> None:
    """Write the fp32 ONNX graph `source` to `target` as int8 OpenVINO IR, quantised by NNCF for a
    transformer (its attention softmax and layer norms stay in float) with activation ranges
    calibrated on `samples` (model inputs, one text each) and the overflow fix on every layer,
    so AVX2 CPUs give the same results as VNNI ones."""
    import nncf
    import openvino as ov
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix

    model = ov.Core().read_model(str(source))
    quantised = nncf.quantize(
        model,
        nncf.Dataset(list(samples)),
        model_type=nncf.ModelType.TRANSFORMER,
        preset=nncf.QuantizationPreset.MIXED,
        subset_size=len(samples),
        advanced_parameters=AdvancedQuantizationParameters(overflow_fix=OverflowFix.ENABLE),
    )
    ov.save_model(quantised, str(target), compress_to_fp16=False)
