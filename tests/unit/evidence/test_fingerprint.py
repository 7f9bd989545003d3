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
    return {
        "module_0000.jit_train_step.cpu_after_optimizations.txt": hlo,
        "module_0000.jit_train_step.cpu_after_optimizations-buffer-assignment.txt": "anything",
        "module_0000.jit_train_step.k.ir-with-opt.ll": ir,
    }


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


# The head of a real dump (jax 0.10, XLA:CPU, the embedded workload under maxtext-slurm's
# monkey patch): XLA writes the tracing Python files' paths in a table after the HloModule line,
# and maxtext-slurm's artifact copy of utils/ is stamped with the second each job started.
TABLES = """HloModule jit_train_step, is_scheduled=true, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

FileNames
1 "/work/main/pytest_xlatune/workload/train.py"
4 "/tmp/t/maxtext-slurm/outputs/.artifacts/artifact_20261204_003007_6934/utils/monkey_patch_maxtext.py"

FunctionNames
1 "build.<locals>.train_step"

FileLocations
1 {file_name_id=1 function_name_id=1 line=57 end_line=57 column=26 end_column=72}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

ENTRY %main.7 (Arg_0.1: f32[4]) -> f32[4] {
  %Arg_0.1 = f32[4]{0} parameter(0), metadata={op_name="x" stack_frame_id=1}
  ROOT %add.3 = f32[4]{0} add(f32[4]{0} %Arg_0.1, f32[4]{0} %Arg_0.1)
}
"""


def test_the_source_tables_of_two_jobs_do_not_count() -> None:
    other = TABLES.replace("artifact_20261204_003007_6934", "artifact_20261204_003010_7572").replace(
        "line=57 end_line=57", "line=58 end_line=58"
    )
    assert canonical_hlo(other) == canonical_hlo(TABLES)
    assert "artifact_" not in canonical_hlo(TABLES) and "%v2 = f32[4]{0} add(" in canonical_hlo(TABLES)
    assert canonical_hlo(TABLES.replace(" add(", " multiply(")) != canonical_hlo(TABLES)
