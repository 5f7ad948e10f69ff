"""Embedded data with a known answer (no download).

* :func:`synthetic_feature_mcqa` — option features with an exact, perfectly calibrated Bayes posterior
  p*_ik = softmax_k(beta* w*^T x_ik); labels are drawn from p*, so ECE(p*) -> 0 as N grows.
* :func:`synthetic_category_mcqa` — text questions over word categories ("Which of the following is a
  fruit?") with label noise rho = 0.1, so a model that fits the training labels becomes overconfident.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch
from torch import Tensor

from .data import MCItem

__all__ = [
    "CATEGORIES",
    "FeatureSplit",
    "SyntheticFeatureMCQA",
    "synthetic_category_mcqa",
    "synthetic_feature_mcqa",
]


@dataclass
class FeatureSplit:
    """Cached features of one split: ``features`` [N, K, D], ``labels`` [N], ``mask`` [N, K]."""

    features: Tensor
    labels: Tensor
    mask: Tensor
    true_probs: Tensor | None = None

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def subset(self, idx: Tensor | list[int]) -> FeatureSplit:
        idx = torch.as_tensor(idx, dtype=torch.long)
        tp = self.true_probs[idx] if self.true_probs is not None else None
        return FeatureSplit(self.features[idx], self.labels[idx], self.mask[idx], tp)


@dataclass
class SyntheticFeatureMCQA:
    """Splits of the synthetic feature task plus its ground truth (``w_star``, ``beta_star``)."""

    splits: dict[str, FeatureSplit]
    w_star: Tensor
    beta_star: float


def _bayes_accuracy(beta: float, w: Tensor, d: int, k: int, gen: torch.Generator) -> float:
    x = torch.randn(20000, k, d, generator=gen)
    p = torch.softmax(beta * x @ w, dim=1)
    return float(p.max(1).values.mean())


def synthetic_feature_mcqa(
    sizes: dict[str, int] | None = None,
    k: int = 4,
    d: int = 16,
    bayes_accuracy: float = 0.7,
    ood_shift: float = 0.5,
    seed: int = 0,
) -> SyntheticFeatureMCQA:
    """Features x_ik ~ N(0, I_d), w* ~ N(0, I_d / d), y_i ~ softmax_k(beta* w*^T x_ik).

    beta* is set by bisection so that the Bayes accuracy E[max_k p*_ik] is ``bayes_accuracy``.
    Splits (default sizes): train 4000, val 1000, test 2000, ood 2000 (features shifted by
    ``ood_shift`` along a random unit direction).
    """
    if not 1.0 / k < bayes_accuracy < 1.0:
        raise ValueError(f"bayes_accuracy must lie in (1/K, 1), got {bayes_accuracy}")
    sizes = sizes or {"train": 4000, "val": 1000, "test": 2000, "ood": 2000}
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(d, generator=gen) / math.sqrt(d)
    lo, hi = 0.0, 50.0
    cal = torch.Generator().manual_seed(seed + 7919)
    for _ in range(30):
        mid = (lo + hi) / 2
        cal.manual_seed(seed + 7919)
        if _bayes_accuracy(mid, w, d, k, cal) < bayes_accuracy:
            lo = mid
        else:
            hi = mid
    beta = (lo + hi) / 2
    shift_dir = torch.randn(d, generator=gen)
    shift_dir = shift_dir / shift_dir.norm()
    splits = {}
    for name, n in sizes.items():
        x = torch.randn(n, k, d, generator=gen)
        if name.startswith("ood"):
            x = x + ood_shift * shift_dir
        p = torch.softmax(beta * x @ w, dim=1)
        y = torch.multinomial(p, 1, generator=gen).squeeze(1)
        splits[name] = FeatureSplit(x, y, torch.ones(n, k, dtype=torch.bool), p)
    return SyntheticFeatureMCQA(splits, w, beta)


CATEGORIES: dict[str, list[str]] = {
    "mammal": "dog cat horse cow sheep goat pig lion tiger bear wolf fox deer rabbit mouse rat whale dolphin elephant giraffe zebra monkey camel otter bat".split(),
    "bird": "eagle hawk owl sparrow robin crow raven pigeon parrot penguin ostrich swan duck goose hen turkey falcon heron stork pelican flamingo peacock finch wren gull".split(),
    "fish": "salmon trout tuna cod carp pike perch bass herring sardine anchovy mackerel shark eel catfish halibut haddock tilapia snapper minnow goldfish guppy piranha sturgeon marlin".split(),
    "insect": "ant bee wasp fly mosquito beetle butterfly moth cricket grasshopper locust termite flea louse dragonfly ladybug firefly cicada aphid mantis hornet gnat earwig weevil midge".split(),
    "fruit": "apple banana cherry grape lemon lime mango melon orange peach pear plum kiwi papaya apricot fig date guava lychee coconut pineapple raspberry strawberry blueberry cranberry".split(),
    "vegetable": "carrot potato onion garlic cabbage lettuce spinach broccoli cauliflower celery cucumber pepper pumpkin radish turnip beet leek pea bean corn kale asparagus artichoke zucchini parsnip".split(),
    "country": "france germany spain italy portugal norway sweden finland denmark poland austria greece egypt kenya nigeria brazil chile peru mexico canada india china japan vietnam thailand".split(),
    "instrument": "piano guitar violin cello viola harp flute oboe clarinet bassoon trumpet trombone tuba saxophone drum banjo mandolin ukulele accordion organ harmonica bagpipe xylophone lute sitar".split(),
    "colour": "red blue green yellow orange purple violet indigo pink brown black white grey crimson scarlet maroon navy teal turquoise beige ivory amber lilac magenta cyan".split(),
    "metal": "iron copper silver gold zinc tin lead nickel aluminium titanium platinum mercury cobalt chromium tungsten lithium sodium potassium magnesium calcium uranium palladium bismuth cadmium manganese".split(),
    "sport": "football tennis golf cricket rugby hockey baseball basketball volleyball badminton boxing wrestling fencing rowing sailing skiing surfing cycling swimming archery judo karate polo squash netball".split(),
    "tool": "hammer saw drill wrench pliers chisel screwdriver spanner axe shovel rake hoe trowel file clamp vice level ruler awl mallet crowbar scissors knife sickle scythe".split(),
    "vehicle": "car bus truck van taxi tram train bicycle motorcycle scooter tractor ambulance lorry jeep wagon cart sled boat ship yacht canoe ferry submarine helicopter airplane".split(),
    "profession": "doctor nurse teacher lawyer engineer farmer baker butcher carpenter plumber electrician pilot sailor soldier judge dentist surgeon architect chemist pharmacist mechanic tailor painter poet banker".split(),
    "body part": "head neck shoulder arm elbow wrist hand finger thumb chest back stomach hip leg knee ankle foot toe heel eye ear nose mouth tongue chin".split(),
}


def _category_item(
    rng: random.Random, cats: list[str], qid: str, source: str
) -> tuple[MCItem, str]:
    kind = rng.random()
    gold = rng.randrange(4)
    if kind < 0.5:
        cat = rng.choice(cats)
        others = rng.sample([c for c in cats if c != cat], 3)
        options = [rng.choice(CATEGORIES[o]) for o in others]
        options.insert(gold, rng.choice(CATEGORIES[cat]))
        question = f"Which of the following is a {cat}?"
    elif kind < 0.75:
        cat = rng.choice(cats)
        other = rng.choice([c for c in cats if c != cat])
        options = rng.sample(CATEGORIES[cat], 3)
        options.insert(gold, rng.choice(CATEGORIES[other]))
        question = f"Which of the following is not a {cat}?"
    else:
        cat = rng.choice(cats)
        word = rng.choice(CATEGORIES[cat])
        options = rng.sample([c for c in CATEGORIES if c != cat], 3)
        options.insert(gold, cat)
        question = f"A {word} is a kind of:"
    return MCItem(qid, question, options, gold, subject=cat, source=source), cat


def synthetic_category_mcqa(
    sizes: dict[str, int] | None = None,
    noise: float = 0.1,
    n_ood_categories: int = 3,
    seed: int = 0,
) -> dict[str, list[MCItem]]:
    """Text MCQA over :data:`CATEGORIES` (question types mixed 0.5/0.25/0.25, gold position uniform).

    With probability ``noise`` the stored answer is replaced by a random wrong option
    (``item.meta["noisy"]`` records it), capping the achievable accuracy at 1 - noise. The ``ood``
    split asks only about ``n_ood_categories`` categories withheld from the other splits.
    Default sizes: train 3000, val 500, test 1000, ood 1000.
    """
    if not 0 <= noise < 0.75:
        raise ValueError(f"noise must lie in [0, 0.75), got {noise}")
    sizes = sizes or {"train": 3000, "val": 500, "test": 1000, "ood": 1000}
    rng = random.Random(seed)
    names = sorted(CATEGORIES)
    ood_cats = rng.sample(names, n_ood_categories)
    in_cats = [c for c in names if c not in ood_cats]
    out: dict[str, list[MCItem]] = {}
    for split, n in sizes.items():
        items = []
        for i in range(n):
            if split.startswith("ood"):
                # the asked-about category is withheld; distractors may come from any category
                cat = rng.choice(ood_cats)
                item, _ = _category_item(rng, [cat, *in_cats], f"{split}-{i}", "synthetic-category")
                while item.subject not in ood_cats:
                    item, _ = _category_item(
                        rng, [cat, *in_cats], f"{split}-{i}", "synthetic-category"
                    )
            else:
                item, _ = _category_item(rng, in_cats, f"{split}-{i}", "synthetic-category")
            noisy = rng.random() < noise
            if noisy:
                item.answer = rng.choice([j for j in range(4) if j != item.answer])
            item.meta["noisy"] = noisy
            items.append(item)
        out[split] = items
    return out
