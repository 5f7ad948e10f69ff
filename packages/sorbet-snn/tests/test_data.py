import pytest
from sorbet_snn.data import detect_task, load_glue, make_synthetic, write_synthetic_glue


def write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_sst2_with_a_lone_quote(tmp_path):
    folder = write(tmp_path / "SST-2", "train.tsv", 'sentence\tlabel\na "great film\t1\nawful\t0\n')
    split = load_glue(folder, "train")
    assert split.text_a == ['a "great film', "awful"] and split.labels == [1, 0]
    assert split.text_b is None and split.num_labels == 2


def test_cola_without_header(tmp_path):
    folder = write(
        tmp_path / "cola", "dev.tsv", "gj04\t1\t\tThe cat sat.\ngj04\t0\t*\tCat the sat.\n"
    )
    split = load_glue(folder, "dev")
    assert split.task == "CoLA" and split.text_a == ["The cat sat.", "Cat the sat."]
    assert split.labels == [1, 0]


def test_pair_tasks_and_regression(tmp_path):
    rte = write(
        tmp_path / "RTE", "dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA\tB\tnot_entailment\n"
    )
    assert load_glue(rte, "dev").labels == [1]
    sts = write(
        tmp_path / "sts-b",
        "train.tsv",
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        "0\tg\tf\t2012\t1\ts\ts\tA man.\tA guy.\t4.2\n",
    )
    split = load_glue(sts, "train")
    assert split.labels == [4.2] and split.is_regression and split.text_b == ["A guy."]
    mrpc = write(
        tmp_path / "MRPC",
        "train.tsv",
        "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tX said.\tX told.\n",
    )
    assert load_glue(mrpc, "train").labels == [1]


def test_mnli_matched_and_mismatched(tmp_path):
    header = "index\tsentence1\tsentence2\tgold_label\n"
    folder = write(tmp_path / "MNLI", "dev_matched.tsv", header + "0\ta\tb\tneutral\n")
    write(folder, "dev_mismatched.tsv", header + "0\tc\td\tentailment\n")
    assert load_glue(folder, "dev").labels == [2]
    assert load_glue(folder, "dev_mismatched").labels == [1]


def test_test_file_has_no_labels(tmp_path):
    folder = write(tmp_path / "RTE", "test.tsv", "index\tsentence1\tsentence2\n0\tA\tB\n")
    assert load_glue(folder, "test").labels is None


def test_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="supported: SST-2"):
        detect_task("imdb")
    with pytest.raises(ValueError, match=r"expected .*dev\.tsv"):
        load_glue(tmp_path / "SST-2", "dev")
    bad_col = write(tmp_path / "a" / "SST-2", "train.tsv", "text\tlabel\nx\t1\n")
    with pytest.raises(ValueError, match="missing column 'sentence'"):
        load_glue(bad_col, "train")
    bad_label = write(tmp_path / "b" / "SST-2", "train.tsv", "sentence\tlabel\nx\t1\ny\tnan\n")
    with pytest.raises(ValueError, match="row 3, column 1"):
        load_glue(bad_label, "train")
    empty = write(tmp_path / "c" / "SST-2", "train.tsv", "")
    with pytest.raises(ValueError, match="empty"):
        load_glue(empty, "train")
    short = write(tmp_path / "d" / "RTE", "train.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA\n")
    with pytest.raises(ValueError, match="row 2 has 2 columns"):
        load_glue(short, "train")
    inf = write(tmp_path / "e" / "STS-B", "train.tsv", "sentence1\tsentence2\tscore\na\tb\tinf\n")
    with pytest.raises(ValueError, match="not finite"):
        load_glue(inf, "train")


def test_synthetic_is_deterministic_balanced_and_round_trips(tmp_path):
    a, b = make_synthetic(200, seed=3), make_synthetic(200, seed=3)
    assert a == b and a != make_synthetic(200, seed=4)
    assert sum(y for _, y in a) == 100
    assert all(4 <= len(s.split()) <= 24 for s, _ in a)
    folder = write_synthetic_glue(tmp_path / "SST-2", (50, 20, 20), seed=3)
    split = load_glue(folder, "train")
    assert list(zip(split.text_a, split.labels)) == make_synthetic(50, seed=3)


def test_real_glue_counts(glue_root):
    expected = {"SST-2": (67349, 872), "RTE": (2490, 277), "CoLA": (8551, 1043), "WNLI": (635, 71)}
    for task, (n_train, n_dev) in expected.items():
        if not (glue_root / task).is_dir():
            continue
        assert len(load_glue(glue_root / task, "train")) == n_train
        assert len(load_glue(glue_root / task, "dev")) == n_dev


def test_hold_out_is_seeded_disjoint_and_capped_at_a_fifth():
    from sorbet_snn.data import hold_out

    val, train = hold_out(100, 30, seed=3)
    assert len(val) == 20 and len(train) == 80  # at most a fifth of the examples
    assert sorted(val + train) == list(range(100))
    assert hold_out(100, 30, seed=3) == (val, train)
    assert hold_out(100, 30, seed=4)[0] != val
    assert len(hold_out(100, 7, seed=3)[0]) == 7
