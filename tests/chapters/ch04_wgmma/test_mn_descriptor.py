"""tests/chapters/ch04_wgmma/test_mn_descriptor.py - the N-major B descriptor of chapter 4: gemm_mn_major.cu's
desc_b_nmajor against judge.hw.wgmma, and what the exercise wgmma_mn_descriptor says when it grades.

Run: python -m pytest tests/chapters/ch04_wgmma/test_mn_descriptor.py -q      (no GPU; grades run in this process)

The kernel's formula is read from the .cu and evaluated here, with its #define values (B_SPAN 128 and
64), for every stage of the ring and every k16 slice: it must be the reference's descriptor, and wgmma,
following it as judge.hw.wgmma.operand_address does, must read every B[k][n] from the byte where TMA put
it (judge.hw.tma's box layout, a model of its own). The exercise's verdicts are
tests/grading/test_exercises.py's; here: what each message names, that drawn inputs alone find every
mistake, and that the statement's examples are the reference's values.
"""
import re

import numpy as np
import pytest

from judge import config
from judge.grading import exercise
from judge.grading.result import Verdict
from judge.hw import tma, wgmma


mn_ref = exercise.get("wgmma_mn_descriptor").reference_module()   # the exercise's reference rules

from tests.checking import graded_here

CU = config.ROOT / "chapters" / "ch04_wgmma" / "gemm_mn_major.cu"
EX = exercise.get("wgmma_mn_descriptor")
CHECK = exercise.import_file(EX.folder / "check.py", "check_wgmma_mn_descriptor_ch04")


# ----------------------------------------------------------------------------- the kernel's own formula
def kernel_constants(src: str, **override) -> dict:
    """Every #define of the file, in order, as Python integers (C's / on ints is //); `override` replaces
    the value of a name the #ifndef block defines, as build.compile(defines=...) would."""
    env = {}
    for line in src.splitlines():
        m = re.match(r"#define\s+(\w+)\s+(.+?)\s*(//.*)?$", line)
        if not m:
            continue
        name, expr = m.group(1), m.group(2)
        env[name] = override[name] if name in override else int(eval(expr.replace("/", "//"), {}, dict(env)))
    return env


def _c_to_python(expr: str) -> str:
    expr = expr.replace("(unsigned long long)", "")
    t = re.fullmatch(r"\s*(.+?)\s*\?\s*(.+?)\s*:\s*(.+?)\s*", expr)
    return f"(({t.group(2)}) if ({t.group(1)}) else ({t.group(3)}))" if t else expr


def desc_b_nmajor(src: str, consts: dict):
    """The kernel's desc_b_nmajor as a Python function of the slice's shared address: its constexpr
    lines and its return expression, read from the source."""
    body = re.search(r"desc_b_nmajor\(const void\* slice\) \{\n(.*?)\n\}", src, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    statements = [s.strip() for s in body.split(";") if s.strip()]
    local = [re.fullmatch(r"constexpr [\w ]+? (\w+) = (.+)", s, re.S) for s in statements]
    ret = next(s for s in statements if s.startswith("return "))[len("return "):]
    assert any(re.search(r"addr = tma::smem\(slice\)", s) for s in statements)

    def f(addr: int) -> int:
        env = dict(consts, addr=addr)
        for m in filter(None, local):
            env[m.group(1)] = eval(_c_to_python(m.group(2)), {}, env)
        return eval(_c_to_python(" ".join(ret.split())), {}, env)
    return f


@pytest.mark.parametrize("b_span", [128, 64])
def test_the_kernels_descriptor_is_the_references_and_reads_b_where_tma_put_it(b_span):
    src = CU.read_text()
    c = kernel_constants(src, B_SPAN=b_span)
    assert (c["BK"], c["BN"], c["B_COLS"]) == (64, 128, b_span // 2)
    desc = desc_b_nmajor(src, c)
    swizzle = {128: "128B", 64: "64B"}[b_span]
    a_bytes, b_bytes, b_box = c["BM"] * c["BK"] * 2, c["BN"] * c["BK"] * 2, c["B_COLS"] * c["BK"] * 2
    base = 0x400                                             # the kernel rounds its dynamic shared memory up to 1024
    sB = base + c["STAGES"] * a_bytes
    # where TMA puts B[k][n] of stage s: box j = n // B_COLS at sB + s * B_BYTES + j * B_BOX, row k, swizzled
    box = tma.box_layout(c["BK"], b_span, swizzle, elem_bytes=2)          # (BK, B_COLS) offsets in the box
    for s in range(c["STAGES"]):
        tile = sB + s * b_bytes
        for ks in range(c["BK"] // 16):
            d = desc(tile + ks * 16 * b_span)                # the address the kernel hands it
            assert d == mn_ref.mnmajor_slice_descriptor(tile, swizzle, ks, rows=c["BN"], k_elems=c["BK"]), \
                (s, ks, hex(d))
            assert d == CHECK.descriptor_reference(tile, swizzle, ks, c["BN"])   # what the exercise grades with
            n = np.arange(c["BN"])[None, :]
            k = np.arange(16)[:, None]
            read = wgmma.operand_address(d, n, k, major="MN")
            put = tile + (n // c["B_COLS"]) * b_box + box[16 * ks + k, n % c["B_COLS"]]
            assert np.array_equal(read, put), (s, ks)


def test_the_kernels_formula_read_as_a_k_major_descriptor_reads_another_matrix():
    src = CU.read_text()
    c = kernel_constants(src)
    d = desc_b_nmajor(src, c)(0x10400)
    n, k = np.arange(64)[:, None], np.arange(16)[None, :]
    assert not np.array_equal(wgmma.operand_address(d, n, k, major="K"), wgmma.operand_address(d, n, k, major="MN"))


# ----------------------------------------------------------------------------- the exercise's messages
SAYS = {
    "wrong_lbo_sbo_swapped.py": ["leading byte offset >> 4, bits 16-29", "wgmma would read B[", "LBO and SBO are exchanged"],
    "wrong_sbo_one_k_row.py": ["stride byte offset >> 4, bits 32-45", "(128 bytes), expected 64", "wgmma would read B[8][0]"],
    "wrong_slice_step_32_bytes.py": ["start address >> 4, bits 0-13", "wgmma would read B[16][0]", "holds B[0][16]"],
    "wrong_base_offset_zero.py": ["base offset, bits 49-51: you have 0 = 0b000, expected 1 = 0b001", "(start >> 7) & 7"],
    "wrong_layout_codes_reversed.py": ["bits 62-63: you have 3 = 0b11, expected 1 = 0b01"],
    "wrong_start_16_bits.py": ["start=65536", "above 64 KiB", "bits 4-17"],
    "wrong_byte_of_no_xor.py": ["byte_of(", "XORed into the 16-byte chunk index", "wgmma reads B[5][43]"],
    "wrong_byte_of_no_box_jump.py": ["n=64", "block 1 x LBO 8192", "wgmma reads B[2][0]"],
    "wrong_byte_of_line_from_address.py": ["off the repeat", "base offset 5"],
}


@pytest.mark.parametrize("name", sorted(SAYS))
def test_each_mistake_is_named_with_its_field_and_what_wgmma_would_read(name):
    r = graded_here("wgmma_mn_descriptor", EX.fixture_path(name))
    assert r.verdict == Verdict.WRONG, str(r)
    for phrase in SAYS[name]:
        assert phrase in str(r), (phrase, str(r))


def test_every_wrong_fixture_is_told_here():
    assert set(SAYS) == {n for n in EX.fixtures if n.startswith("wrong_")}


#: listed cases that are there for one mistake: the fixture, and the words of the only cases that find it
ONLY_FOUND_BY = {"wrong_start_16_bits.py": "above 64 KiB", "wrong_base_offset_zero.py": "off the 1024-byte repeat",
                 "wrong_byte_of_line_from_address.py": "off the repeat"}


@pytest.mark.parametrize("name", sorted(ONLY_FOUND_BY))
def test_the_listed_cases_off_the_repeat_and_above_64_kib_find_a_mistake_no_other_listed_case_finds(name):
    mod = exercise.import_file(EX.fixture_path(name), f"fixture_mn_{name[:-3]}")
    found = []
    for fn in (CHECK.DESCRIPTOR, CHECK.BYTE_OF):
        for e in fn.edges:
            if int(getattr(mod, fn.name)(*e.args)) != fn.reference(*e.args):
                found.append(e.why)
    assert found and all(ONLY_FOUND_BY[name] in why for why in found), found


@pytest.mark.parametrize("name", sorted(SAYS))
def test_drawn_inputs_alone_find_each_mistake(name):
    r = graded_here("wgmma_mn_descriptor", EX.fixture_path(name), drawn_only=True, seed=20261201)
    assert r.verdict == Verdict.WRONG, str(r)
    assert "drawn at random and shrunk" in " ".join(r.details) and "seed 20261201" in " ".join(r.details), str(r)


def test_the_solution_passes_on_drawn_inputs_and_the_check_needs_no_solution_file():
    r = graded_here("wgmma_mn_descriptor", EX.solution_path, drawn_only=True, seed=7)
    assert r.verdict == Verdict.PASS and "seed 7" in r.message, str(r)
    assert int(r.message.split(" inputs drawn")[0].split()[-1]) >= 100, r.message
    text = (EX.folder / "check.py").read_text()
    assert "reference()" not in text and "solution" not in [ln.split()[-1] for ln in text.splitlines()
                                                          if ln.startswith("import")]


@pytest.mark.parametrize("name", ["correct_numpy_scalars.py", "correct_from_layout.py"])
def test_the_correct_alternatives_pass(name):
    assert EX.fixtures[name] == "PASS"
    r = graded_here("wgmma_mn_descriptor", EX.fixture_path(name), seed=3)
    assert r.verdict == Verdict.PASS, str(r)


def test_the_starter_says_what_to_fill_in():
    r = graded_here("wgmma_mn_descriptor", EX.starter_path)
    assert r.verdict == Verdict.WRONG and "NotImplementedError" in str(r) and "nmajor_slice_descriptor" in str(r), str(r)


def test_the_statements_examples_are_the_references_values():
    desc, byte = CHECK.descriptor_reference, CHECK.byte_reference
    readme = EX.statement()
    assert desc(0x400, "128B", 0) == 0x4000004002000040 and "0x4000004002000040" in readme
    assert wgmma.decode(desc(0x400, "128B", 1)).start == 0xC00
    d = desc(0x8680, "128B", 2)
    assert d == 0x400A004002000968 and wgmma.decode(d).base_offset == 5 and wgmma.decode(d).start == 0x9680
    d0 = desc(0x400, "128B", 0)
    assert (byte(d0, 0, 1), byte(d0, 64, 0), byte(d0, 9, 3)) == (0x490, 0x2400, 0x5A2)
    for text in ("0x400A004002000968", "0x490", "0x2400", "0x5A2"):
        assert text in readme, text
