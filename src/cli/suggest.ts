/**
 * The known word a mistyped one most likely meant, as git and npm suggest one ("did you mean …?"):
 * the nearest by edit distance (a letter added, dropped, changed, or two swapped), if it is at most
 * a third of the word away; null when nothing is that near, or two are equally near.
 */
export function nearest(word: string, known: readonly string[]): string | null {
  const most = Math.max(1, Math.floor(word.length / 3));
  let best: string | null = null;
  let bestDistance = most + 1;
  let tied = false;
  for (const candidate of known) {
    const d = editDistance(word, candidate);
    if (d < bestDistance) [best, bestDistance, tied] = [candidate, d, false];
    else if (d === bestDistance) tied = true;
  }
  return tied ? null : best;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}

/** ` (did you mean "apps"?)` after an unknown word's message, or nothing. */
export function didYouMean(word: string, known: readonly string[]): string {
  const guess = nearest(word, known);
  return guess === null ? '' : ` (did you mean "${guess}"?)`;
}
