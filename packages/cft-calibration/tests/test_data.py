import json

import cft_calibration as C
import pytest

HF_HEADER = "question,choice0,choice1,choice2,choice3,answer\n"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_mmlu_hf_csv_with_quoted_newlines_and_commas(tmp_path):
    f = write(
        tmp_path / "test" / "anatomy_test.csv",
        HF_HEADER + '"What is\na bone, really?",a,b,"c, d",e,2\nSecond?,w,x,y,z,0\n',
    )
    items = C.load_mmlu(tmp_path, split="test")
    assert len(items) == 2
    assert items[0].question == "What is\na bone, really?" and items[0].choices[2] == "c, d"
    assert items[0].answer == 2 and items[0].subject == "anatomy"
    assert C.load_mcqa(f)[1].answer == 0


def test_mmlu_original_hendrycks_layout(tmp_path):
    f = write(tmp_path / "data" / "test" / "virology_test.csv", "Q1?,a,b,c,d,C\nQ2?,a,b,c,d,A\n")
    items = C.load_mmlu(f, split=None)
    assert [it.answer for it in items] == [2, 0] and items[0].subject == "virology"


def test_mmlu_json_layout_and_duplicate_option_texts_are_legal(tmp_path):
    recs = [
        {"question": "Q?", "subject": "astronomy", "choices": ["x", "x", "y", "z"], "answer": 1}
    ]
    f = write(tmp_path / "mmlu.json", json.dumps(recs))
    items = C.load_mcqa(f)
    assert items[0].choices == ["x", "x", "y", "z"] and items[0].subject == "astronomy"


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("Q?,a,b,c,d,nan\n", r"anatomy_test.csv:2.*answer 'nan'"),
        ("Q?,a,b,c,d,4\n", "out of range"),
        ("Q?,a,b,c,d,1.5\n", "not an integer"),
        ("Q?,a,b,c\n", "expected 6 columns"),
        (",a,b,c,d,1\n", "question is empty"),
    ],
)
def test_mmlu_errors_name_the_file_and_line(tmp_path, body, match):
    write(tmp_path / "anatomy_test.csv", HF_HEADER + "Fine?,a,b,c,d,0\n" * 0 + body)
    with pytest.raises(ValueError, match=match):
        C.load_mmlu(tmp_path / "anatomy_test.csv")


def test_empty_and_header_only_and_bad_utf8(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        C.load_mmlu(write(tmp_path / "a_test.csv", ""))
    with pytest.raises(ValueError, match="header only"):
        C.load_mmlu(write(tmp_path / "b_test.csv", HF_HEADER))
    bad = tmp_path / "c_test.csv"
    bad.write_bytes(HF_HEADER.encode() + b"Q\xff?,a,b,c,d,0\n")
    with pytest.raises(ValueError, match=r"c_test.csv:2: not valid UTF-8"):
        C.load_mmlu(bad)


OBQA_HEADER = "ID\tQuestion Stem\tChoices\tComplete Question\tAnswer Key\n"


def test_openbookqa_tsv_split_markers_keep_a_second_d_marker(tmp_path):
    rows = [
        "1-1\tWhat is hot?\t(A) ice (B) fire (C) snow (D) rain\tx\tB",
        "12-1145\tWhich?\t(A) one (B) two (C) three (D) four (D) more\tx\tB",
    ]
    write(tmp_path / "Main" / "test.tsv", OBQA_HEADER + "\n".join(rows) + "\n")
    items = C.load_openbookqa(tmp_path, split="test")
    assert items[0].choices == ["ice", "fire", "snow", "rain"] and items[0].answer == 1
    assert items[1].choices[3] == "four (D) more"
    assert C.detect_format(tmp_path) == "obqa"


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ("1\tQ?\t(A) a (B) b (C) c (D) d\tx\tE", "Answer Key 'E'"),
        ("1\tQ?\t(A) a (B) b (C) c\tx\tA", r"marker '\(D\)'"),
        ("1\tQ?\t(A) a (B) b (C) c (D) d\tA", "5 tab-separated columns"),
        ("1\t\t(A) a (B) b (C) c (D) d\tx\tA", "question stem is empty"),
    ],
)
def test_openbookqa_errors(tmp_path, row, match):
    f = write(tmp_path / "dev.tsv", OBQA_HEADER + row + "\n")
    with pytest.raises(ValueError, match=match):
        C.load_openbookqa(f)


def test_arc_jsonl_numeric_labels_and_three_or_five_options(tmp_path):
    recs = [
        {
            "id": "a",
            "question": {
                "stem": "S1",
                "choices": [{"text": t, "label": str(i + 1)} for i, t in enumerate("xyz")],
            },
            "answerKey": "3",
        },
        {
            "id": "b",
            "question": {
                "stem": "S2",
                "choices": [{"text": t, "label": "ABCDE"[i]} for i, t in enumerate("vwxyz")],
            },
            "answerKey": "E",
        },
    ]
    f = write(
        tmp_path / "ARC-Challenge" / "ARC-Challenge-Test.jsonl",
        "\n".join(json.dumps(r) for r in recs),
    )
    items = C.load_arc(tmp_path)
    assert [it.k for it in items] == [3, 5] and [it.answer for it in items] == [2, 4]
    with pytest.raises(ValueError, match="expected 4"):
        C.load_arc(f, k_fixed=4)


def test_arc_duplicate_labels_and_bad_key(tmp_path):
    rec = {
        "question": {
            "stem": "S",
            "choices": [{"text": "a", "label": "A"}, {"text": "b", "label": "A"}],
        },
        "answerKey": "A",
    }
    with pytest.raises(ValueError, match="duplicate option labels"):
        C.load_arc(write(tmp_path / "x.jsonl", json.dumps(rec)))
    rec = {
        "question": {
            "stem": "S",
            "choices": [{"text": "a", "label": "A"}, {"text": "b", "label": "B"}],
        },
        "answerKey": "C",
    }
    with pytest.raises(ValueError, match=r"x2.jsonl:1: answerKey 'C'"):
        C.load_arc(write(tmp_path / "x2.jsonl", json.dumps(rec)))


def test_openbookqa_jsonl_with_fact(tmp_path):
    rec = {
        "id": "7",
        "question": {
            "stem": "S",
            "choices": [{"text": t, "label": "ABCD"[i]} for i, t in enumerate("abcd")],
        },
        "answerKey": "D",
        "fact1": "a fact",
    }
    items = C.load_openbookqa(write(tmp_path / "test_complete.jsonl", json.dumps(rec)))
    assert items[0].answer == 3 and items[0].explanation == "a fact"


def test_medmcqa_cop_base(tmp_path):
    def rec(cop):
        return json.dumps(
            {
                "question": "Q",
                "opa": "a",
                "opb": "b",
                "opc": "c",
                "opd": "d",
                "cop": cop,
                "exp": "e",
            }
        )

    one = write(tmp_path / "one.jsonl", rec(4) + "\n" + rec(1))
    assert [it.answer for it in C.load_medmcqa(one)] == [3, 0]
    zero = write(tmp_path / "zero.jsonl", rec(0) + "\n" + rec(2))
    assert [it.answer for it in C.load_medmcqa(zero)] == [0, 2]
    amb = write(tmp_path / "amb.jsonl", rec(1) + "\n" + rec(2))
    with pytest.raises(ValueError, match="cop_base"):
        C.load_medmcqa(amb)
    assert [it.answer for it in C.load_medmcqa(amb, cop_base=1)] == [0, 1]
    assert C.detect_format(amb) == "medmcqa"


def test_generic_jsonl_and_round_trip(tmp_path):
    f = write(
        tmp_path / "g.jsonl",
        '{"question": "Q?", "choices": ["a", "b", "c"], "answer": "B"}\n{"question": "R?", "choices": ["a", "b"], "answer": 0}\n',
    )
    items = C.load_jsonl(f)
    assert [it.answer for it in items] == [1, 0]
    back = C.load_jsonl(C.write_jsonl(items, tmp_path / "back.jsonl"))
    assert [(it.question, it.choices, it.answer) for it in back] == [
        (it.question, it.choices, it.answer) for it in items
    ]


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"question": "Q", "choices": ["a"], "answer": 0}', "at least 2 choices"),
        ('{"question": "Q", "choices": ["a", "b"], "answer": NaN}', "not an integer"),
        ('{"question": "Q", "choices": ["a", "b"], "answer": 2}', "out of range"),
        ('{"question": "", "choices": ["a", "b"], "answer": 0}', "question is empty"),
        ('{"choices": ["a", "b"], "answer": 0}', "missing field 'question'"),
        ('{"question": "Q", "choices": ["a", "b"], "answer": 0', "not valid JSON"),
    ],
)
def test_generic_jsonl_errors_name_file_and_line(tmp_path, line, match):
    f = write(
        tmp_path / "g.jsonl",
        '{"question": "ok", "choices": ["a", "b"], "answer": 0}\n' + line + "\n",
    )
    with pytest.raises(ValueError, match=r"g.jsonl:2: .*" + match):
        C.load_jsonl(f)


def test_split_items_is_seeded_stratified_and_covers_the_fractions():
    items = [C.MCItem(str(i), "q", ["a", "b"], 0, subject="s" + str(i % 3)) for i in range(300)]
    a = C.split_items(items, [0.35, 0.1, 0.3, 0.1, 0.15], seed=1)
    b = C.split_items(items, [0.35, 0.1, 0.3, 0.1, 0.15], seed=1)
    assert [[it.id for it in p] for p in a] == [[it.id for it in p] for p in b]
    assert [len(p) for p in a] == [105, 30, 90, 30, 45]
    assert len({it.id for p in a for it in p}) == 300


def test_synthetic_category_noise_and_ood_categories():
    sets = C.synthetic_category_mcqa({"train": 400, "ood": 100}, seed=0)
    noisy = sum(it.meta["noisy"] for it in sets["train"]) / 400
    assert 0.05 < noisy < 0.16
    train_subjects = {it.subject for it in sets["train"]}
    assert not train_subjects & {it.subject for it in sets["ood"]}
    assert all(len(set(it.choices)) == 4 for it in sets["train"])


@pytest.mark.dataset
def test_real_openbookqa_counts(obqa_dir):
    counts = {s: len(C.load_openbookqa(obqa_dir, split=s)) for s in ("train", "dev", "test")}
    assert counts == {"train": 4957, "dev": 500, "test": 500}
    test = C.load_openbookqa(obqa_dir, split="test")
    assert sum(it.answer == 0 for it in test) == 138  # A138/B126/C132/D104 (PROVENANCE.md)
    assert test[0].id == "8-343"
    train = {it.id: it for it in C.load_openbookqa(obqa_dir, split="train")}
    assert "(D)" in train["12-1145"].choices[3] and train["12-1145"].answer == 1


@pytest.mark.dataset
def test_real_mmlu_counts(mmlu_dir):
    test = C.load_mmlu(mmlu_dir, split="test")
    assert len(test) == 14042 and len({it.subject for it in test}) == 57
    assert len(C.load_mmlu(mmlu_dir, split="dev")) == 285
    chem = C.load_mmlu(mmlu_dir, split="test", subjects=["high_school_chemistry"])
    assert len(chem) == 203
