"""How a knob setting becomes a reduction kernel's launch (kernelarc/kernelgen/knobs.py)."""

from dataclasses import replace

from reference_check import Traced

from kernelarc.kernelgen import generate
from kernelarc.kernelgen.kernel_types import Launch
from kernelarc.kernelgen.knobs import default_knobs, fit_stages, launch_for
from kernelarc.kernelgen.space import Space


def test_a_row_of_32k_is_reduced_in_one_pass_with_the_warps_its_registers_need() -> None:
    launch = launch_for(Space((16384, 32767), (1,)), default_knobs("cuda"), "cuda")
    assert launch.persistent and launch.rblock == 32768 and launch.xblock == 1
    # 32768 values over 32 warps: 32 a thread, as a 8192-value tile over 8 warps.
    assert launch.num_warps == 32


def test_a_tile_within_the_register_budget_keeps_the_knobs_warps() -> None:
    knobs = default_knobs("cuda") | {"NUM_WARPS_RED": 4, "ROWS": 1}
    launch = launch_for(Space((4096, 4096), (1,)), knobs, "cuda")
    assert launch.persistent and launch.rblock == 4096
    assert launch.num_warps == 4


def test_a_looped_row_keeps_its_chunk_and_warps() -> None:
    knobs = default_knobs("cuda") | {"PERSISTENT_MAX": 4096, "NUM_WARPS_RED": 8, "ROWS": 1}
    launch = launch_for(Space((64, 65536), (1,)), knobs, "cuda")
    assert not launch.persistent and launch.rblock == knobs["BLOCK_R"]
    assert launch.num_warps == 8


def test_the_interpreter_is_given_no_extra_warps() -> None:
    launch = launch_for(Space((16, 32767), (1,)), default_knobs("cpu"), "cpu")
    assert launch.persistent and launch.num_warps == default_knobs("cpu")["NUM_WARPS_RED"]


def test_gemm_stages_are_cut_to_what_shared_memory_holds() -> None:
    # 128 x 64 and 64 x 128 float32 tiles: 64 KiB a stage, 3 fit in 227 KiB, 4 do not.
    launch = Launch(xblock=128, rblock=128, kblock=64, num_stages=4)
    assert fit_stages(launch, "float32", "float32").num_stages == 3
    # In 16 bits the same tiles are 32 KiB a stage: 4 fit.
    assert fit_stages(launch, "bfloat16", "bfloat16").num_stages == 4
    # Not a GEMM, or no stages asked for: unchanged.
    assert fit_stages(Launch(xblock=128, num_stages=4), "float32", "float32").num_stages == 4
    assert fit_stages(replace(launch, num_stages=0), "float32", "float32").num_stages == 0


def test_a_generated_gemm_launches_with_stages_that_fit(gen_problems: Traced) -> None:
    problem, traces = gen_problems["linear_silu"]
    # Tiles are cut to the extents: for M = 33, 64 x 64 x 64, 32 KiB a float32 stage, so 7 of
    # 8 stages fit; for M = 7, 16 x 64 and 64 x 64, 20 KiB a stage, so all 8 do.
    knobs = default_knobs("cuda") | {"FUSE_GEMM": 1, "NUM_STAGES": 8}
    source = generate(problem.definition, traces, knobs, "cuda", "t").source
    assert source.count("num_stages=7") == 1 and source.count("num_stages=8") == 1
