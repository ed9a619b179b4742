/**
 * The order in which servers take their turns in interleaved rounds.
 *
 * A server's round is not independent of the one before it: the load
 * generators may still be busy with the previous server's clients, and the
 * previous server may still be collecting garbage on the shared core. Turning
 * a fixed list round by round keeps most neighbours fixed (each server mostly
 * follows the same one), so any such effect would land on each server
 * differently and show up in their ratios. A Williams design lets each server come right
 * after each other server equally often instead: with n servers, every
 * ordered pair is adjacent exactly once within n rounds (twice within 2n
 * rounds when n is odd).
 */

/** The positions 0…n-1 in the order they take their turns in round `round` (0-based). */
export function balancedOrder(n: number, round: number): number[] {
  if (n <= 0) return [];
  // First row: 0, 1, n-1, 2, n-2, …: with n even, its steps between neighbours are all distinct mod n.
  const first: number[] = [0];
  for (let lo = 1, hi = n - 1; first.length < n; ) {
    first.push(lo++);
    if (first.length < n) first.push(hi--);
  }
  const shift = round % n;
  const row = first.map((x) => (x + shift) % n);
  // With n odd the steps are distinct only up to sign: the mirrored rows cover the other direction.
  const mirrored = n % 2 === 1 && Math.floor(round / n) % 2 === 1;
  return mirrored ? row.reverse() : row;
}
