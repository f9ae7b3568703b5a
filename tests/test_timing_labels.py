"""How a speedup and its interval are printed: never a number beside an interval it is not in."""

from kernelarc.timing_labels import speedup_text


def test_a_speedup_inside_its_interval_is_printed_with_it() -> None:
    assert speedup_text(1.02, 0.98, 1.05, 1.01) == "1.02x [0.98, 1.05]"


def test_an_official_speedup_outside_the_interleaved_interval_shows_the_interleaved_one() -> None:
    # The eager reference measured against itself on a busy CPU: the official pair of timings
    # said 2.16x, the interleaved blocks about 1.
    assert speedup_text(2.16, 0.97, 1.16, 1.06) == "2.16x (interleaved 1.06x [0.97, 1.16])"


def test_without_an_interval_only_the_speedup() -> None:
    assert speedup_text(1.5, None, None, None) == "1.50x"


def test_small_speedups_keep_two_significant_digits() -> None:
    # A Triton kernel in the CPU interpreter: 0.0043x, not 0.00x.
    assert speedup_text(0.0043, 0.0045, 0.0049, 0.0047) == (
        "0.0043x (interleaved 0.0047x [0.0045, 0.0049])"
    )
