"""Fingerprints of the compiled train step: canonical forms, on text."""

from __future__ import annotations

from pytest_xlatune.evidence.fingerprint import canonical_hlo, canonical_ir, fingerprint

HLO = """HloModule jit_train_step, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY %main.7 (Arg_0.1: f32[4]) -> f32[4] {
  %Arg_0.1 = f32[4]{0} parameter(0), metadata={op_name="x" source_file="/a/train.py" source_line=12}
  ROOT %add.3 = f32[4]{0} add(f32[4]{0} %Arg_0.1, f32[4]{0} %Arg_0.1), metadata={op_name="jit(f)/add"}
}
"""

IR = """; ModuleID = '__compute_module_call.7_computation_kernel_module'
source_filename = "call.7"
define ptr @k(ptr %args) {
  %arg3_gep = getelementptr i8, ptr %args, i64 48
  %arg3 = load ptr, ptr %arg3_gep, align 8, !invariant.load !3, !dereferenceable !6
  %arg1_gep = getelementptr i8, ptr %args, i64 16
  %arg1 = load ptr, ptr %arg1_gep, align 8, !invariant.load !3, !dereferenceable !4
  store i8 %4, ptr %arg3, align 64
  ret ptr null
}
!3 = !{}
"""


def _files(hlo: str, ir: str) -> dict[str, str]:
    return {"module_0000.jit_train_step.cpu_after_optimizations.txt": hlo,
            "module_0000.jit_train_step.cpu_after_optimizations-buffer-assignment.txt": "anything",
            "module_0000.jit_train_step.k.ir-with-opt.ll": ir}


def test_hlo_metadata_and_names_do_not_count() -> None:
    renamed = HLO.replace("%add.3", "%add.99").replace("%main.7", "%main.1").replace("source_line=12", "source_line=13")
    assert canonical_hlo(renamed) == canonical_hlo(HLO)
    assert canonical_hlo(HLO.replace(" add(", " multiply(")) != canonical_hlo(HLO)


def test_ir_metadata_numbers_and_argument_order_do_not_count() -> None:
    reordered = IR.replace("!dereferenceable !6", "!dereferenceable !5").replace("%arg3", "%arg7")
    assert canonical_ir(reordered) == canonical_ir(IR)
    assert canonical_ir(IR.replace("align 64", "align 32")) != canonical_ir(IR)


def test_the_module_id_and_side_files_do_not_count() -> None:
    base = fingerprint(_files(HLO, IR))
    moved = {k.replace("module_0000", "module_0042"): v for k, v in _files(HLO, IR).items()}
    moved["module_0042.jit_train_step.cpu_after_optimizations-buffer-assignment.txt"] = "other"
    assert fingerprint(moved).same_program(base)


def test_equal_hlo_with_other_code_is_another_program() -> None:
    base = fingerprint(_files(HLO, IR))
    other = fingerprint(_files(HLO, IR.replace("align 64", "align 32")))
    assert other.hlo_digest == base.hlo_digest
    assert not other.same_program(base)


def test_hlo_alone_never_makes_a_flag_inert() -> None:
    only_hlo = fingerprint({"module_0000.jit_train_step.cpu_after_optimizations.txt": HLO})
    assert not only_hlo.complete
    assert not only_hlo.same_program(only_hlo)

