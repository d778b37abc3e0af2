"""ROC AUC of River's HalfSpaceTrees on the streams `hst_auc --csv DIR` writes, scored the same
way (score, then learn) with the same forest shape (10 trees, height 8, window 250), so the two
figures compare. Usage: python hst_auc_river.py DIR"""
import csv
import pathlib
import sys

from river import anomaly


def auc(scored):
    scored.sort(key=lambda s: s[0])
    rank_sum, pos, i = 0.0, 0, 0
    while i < len(scored):
        j = i
        while j < len(scored) and scored[j][0] == scored[i][0]:
            j += 1
        mean_rank = (i + 1 + j) / 2
        for s in scored[i:j]:
            if s[1]:
                rank_sum += mean_rank
                pos += 1
        i = j
    neg = len(scored) - pos
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


for path in sorted(pathlib.Path(sys.argv[1]).glob("*.csv")):
    forest = anomaly.HalfSpaceTrees(n_trees=10, height=8, window_size=250, seed=42)
    scored = []
    with open(path) as f:
        for n, row in enumerate(csv.reader(f)):
            x = {f"f{d}": float(v) for d, v in enumerate(row[:-1])}
            s = forest.score_one(x)
            forest.learn_one(x)
            if n >= 250:
                scored.append((s, row[-1] == "1"))
    print(f"{path.stem}: {auc(scored):.4f}")
