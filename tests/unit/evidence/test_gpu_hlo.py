"""Real XLA:GPU compiled modules: fusions, library kernels (cuBLAS, Triton, cuFFT) and collectives."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_xlatune.evidence import hlo
from pytest_xlatune.evidence.artifacts import load
from pytest_xlatune.evidence.collective_table import inventory
from pytest_xlatune.evidence.kernels import KernelInventory, describe, kernel_inventory, library_of
from pytest_xlatune.report.build import build
from pytest_xlatune.report.markdown import render_tuning_md
from tests import report_cases as cases

GPU = Path(__file__).resolve().parents[2] / "data" / "hlo" / "gpu"


def _read(name: str) -> str:
    return (GPU / f"{name}.after_optimizations.txt").read_text()


def test_one_gpu_cublas_gemm_and_a_loop_fusion() -> None:
    found = kernel_inventory(_read("cublas_gemm"))
    assert found == KernelInventory(fusions=(("kLoop", 1),), custom_fusions=(), custom_calls=(("__cublas$gemm", 1),))
    assert found.by_library() == (("cuBLAS", 1),)
    assert describe(found) == "1 fusions (kLoop 1); library kernels: cuBLAS 1; by target: __cublas$gemm 1"
    assert hlo.collectives(_read("cublas_gemm")) == []  # one GPU: nothing to communicate


def test_triton_gemm_is_a_custom_fusion_and_its_body_is_not_counted() -> None:
    found = kernel_inventory(_read("triton_gemm"))
    # the body's dot, converts and multiply run inside the one Triton kernel
    assert (found.fusions, found.custom_fusions, found.custom_calls) == ((("kCustom", 1),), (("__triton_gemm", 1),), ())
    assert found.by_library() == (("Triton", 1),)


def test_sixteen_a100_fft_with_sync_all_to_all() -> None:
    text = _read("a100x16_fft_all_to_all")
    found = kernel_inventory(text)
    assert found.fusions == (("kLoop", 3), ("kInput", 2))
    assert found.library_ops == (("fft", 3),)
    assert found.by_library() == (("cuFFT", 3),)
    ops = hlo.collectives(text)
    assert [(c.name, c.kind, c.bytes, c.done) for c in ops] == [
        ("all-to-all-start", hlo.Kind.ALL_TO_ALL, 64 * 64 * 256 * 8, "all-to-all-done"),
        ("all-to-all-start.1", hlo.Kind.ALL_TO_ALL, 64 * 64 * 256 * 8, "all-to-all-done.1"),
    ]
    # written as start/done but "is_sync":true: XLA runs them blocking, nothing overlaps
    assert all(c.async_form and c.marked_sync and not c.is_async for c in ops)
    (row,) = inventory(ops)
    assert (row.count, row.sync_count, row.async_count, row.total_bytes) == (2, 2, 0, 2 * 8388608)


def test_nested_fusion_bodies_and_continued_lines() -> None:
    # Synthetic, shaped like XLA's nested Triton GEMM fusions: the inner fusion lives in the
    # outer one's body and is no kernel of its own; the backend_config continues on a new line.
    text = """HloModule m, is_scheduled=true

%inner (p: bf16[64,64]) -> bf16[64,64] {
  ROOT %p = bf16[64,64]{1,0} parameter(0)
}

%outer (a: bf16[64,64]) -> bf16[64,64] {
  %a = bf16[64,64]{1,0} parameter(0)
  ROOT %f = bf16[64,64]{1,0} fusion(bf16[64,64]{1,0} %a), kind=kCustom, calls=%inner
}

ENTRY %main (x: bf16[64,64]) -> bf16[64,64] {
  %x = bf16[64,64]{1,0} parameter(0)
  %lt = (bf16[64,64]{1,0}, s8[0]{0}) custom-call(bf16[64,64]{1,0} %x, bf16[64,64]{1,0} %x),
      custom_call_target="__cublas$lt$matmul"
  ROOT %g = bf16[64,64]{1,0} fusion(bf16[64,64]{1,0} %x), kind=kCustom, calls=%outer,
      backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion"}}
}
"""
    found = kernel_inventory(text)
    assert found.fusions == (("kCustom", 1),)
    assert found.custom_fusions == (("__triton_nested_gemm_fusion", 1),)
    assert found.custom_calls == (("__cublas$lt$matmul", 1),)
    assert found.by_library() == (("Triton", 1), ("cuBLASLt", 1))


@pytest.mark.parametrize(
    ("name", "library"),
    [
        ("__cublas$gemm", "cuBLAS"),
        ("__cublas$lt$matmul", "cuBLASLt"),
        ("__cudnn$fmhaSoftmax", "cuDNN"),
        ("__triton_gemm", "Triton"),
        ("fft", "cuFFT"),
        ("__ynn_fusion", None),
        ("Sharding", None),
    ],
)
def test_library_of_names_gpu_libraries_only(name: str, library: str | None) -> None:
    assert library_of(name) == library


def test_cpu_dump_has_fusions_and_no_gpu_library() -> None:
    found = kernel_inventory((GPU.parent / "fsdp.txt").read_text())
    assert found.fusion_count > 0 and found.by_library() == ()


def test_gpu_evidence_run_reports_its_library_kernels(tmp_path: Path) -> None:
    """artifacts.load reads the kernels of a GPU train-step dump; the report prints them in one line."""
    dump = tmp_path / "xla_dump"
    dump.mkdir()
    (dump / "module_0007.jit_train_step.sm_9.0_gpu_after_optimizations.txt").write_text(_read("cublas_gemm"))
    jobs = cases.Jobs(1)
    jobs.wave1(baselines=(1000.0, 1004.0), restore=None, config_tag="default")
    base = jobs.add(
        "wave1.5::evidence", "evidence", "evidence", 990.0, config_tag="default", artifacts=(("hlo_dump", str(dump)),)
    )
    evidence = load(base)
    assert evidence.kernels is not None and evidence.kernels.custom_calls == (("__cublas$gemm", 1),)
    line = "1 fusions (kLoop 1); library kernels: cuBLAS 1; by target: __cublas$gemm 1"
    assert evidence.gpu_kernels == line
    cell = cases.cpu_cell("demo_gpu", parallelism=(("FSDP", 1),))
    for language, lead in (("en", "Kernels in the compiled train step: "), ("zh", "编译后 train step 中的 kernel：")):
        text = render_tuning_md(
            build(cell, jobs.results, "localhost", "local", today=cases.DATE, loaded={base.job_id: evidence}),
            language=language,
        )
        assert f"{lead}{line}." in text
    cpu = dataclasses.replace(evidence, kernels=kernel_inventory((GPU.parent / "fsdp.txt").read_text()))
    assert cpu.gpu_kernels == ""  # CPU modules: no kernels line (the collectives table says it all)
