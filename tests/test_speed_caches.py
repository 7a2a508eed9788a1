"""The speed work's shortcuts give the answers of the plain computation they replace."""
import random

from kernelstrain import contamination


def plain_posting_classes(sources):
    """Matcher's posting classes as first written: each shingle's targets gathered and sorted."""
    postings = {}
    for specific, mine in sources:
        for g in specific:
            postings.setdefault(g, []).extend(mine)
    classes = {}
    index = {g: classes.setdefault(tuple(sorted(ts)), len(classes)) for g, ts in postings.items()}
    return index, classes


def test_posting_classes_equal_the_plain_sort_on_random_sources():
    rng = random.Random(7)
    for _ in range(200):
        targets = list(range(rng.randrange(1, 30)))
        rng.shuffle(targets)
        sources, at = [], 0
        while at < len(targets):           # each target belongs to one source, as in Matcher
            n = rng.randrange(1, 4)
            sources.append(([rng.randrange(40) for _ in range(rng.randrange(0, 12))], targets[at:at + n]))
            at += n
        sources = [(list(dict.fromkeys(g)), mine) for g, mine in sources]     # a source's shingles are distinct
        got, want = contamination.posting_classes(sources), plain_posting_classes(sources)
        assert got == want and list(got[0]) == list(want[0]) and list(got[1]) == list(want[1])
