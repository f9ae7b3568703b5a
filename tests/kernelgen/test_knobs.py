"""How a knob setting becomes a reduction kernel's launch (kernelarc/kernelgen/knobs.py)."""

from kernelarc.kernelgen.knobs import default_knobs, launch_for
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
