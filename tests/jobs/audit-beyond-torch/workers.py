"""Results taken in the order workers finish; each planted line carries a hazard comment."""

from concurrent.futures import ThreadPoolExecutor, as_completed
from multiprocessing import Pool


def square(x: float) -> float:
    return x * x


def gathered(values: list[float]) -> list[object]:
    with ThreadPoolExecutor(4) as executor:
        futures = [executor.submit(square, v) for v in values]
        results = []
        for future in as_completed(futures):  # hazard: completion-order
            results.append(future.result())
        done = 0
        for future in as_completed(futures):
            future.result()
            done += 1
        in_order = [future.result() for future in futures]
    with Pool(2) as pool:
        total = 0.0
        for value in pool.imap_unordered(square, values):  # hazard: completion-order
            total += value
        summed = sum(pool.imap_unordered(square, values))  # hazard: completion-order
        ordered = sorted(pool.imap_unordered(square, values))
        mapped = list(pool.imap(square, values))
    return [results, done, in_order, total, summed, ordered, mapped]
