/**
 * A map that keeps its first entry in fields and makes a real Map only when
 * a second key is added. For per-client maps that usually hold one entry (a
 * client naming one glob): a small object instead of a Map and its hash
 * table, several times the size, for each of thousands of idle streams.
 *
 * Emptied, it holds nothing again: the next key goes into the fields.
 *
 * Keys compare as in a Map (SameValueZero) and iterate in insertion order.
 * Unlike a Map's, an iteration in progress does not see some changes: one
 * begun while it holds a single entry misses keys added during it, and one
 * begun while it held several misses the delete that empties it (and keys
 * added after that delete).
 */
export class CompactMap<K, V> implements ReadonlyMap<K, V> {
  /** Every entry, once a second key was added. */
  private many: Map<K, V> | undefined;
  private soleKey: K | undefined;
  private soleValue: V | undefined;
  private holdsSole = false;

  get size(): number {
    if (this.many) return this.many.size;
    return this.holdsSole ? 1 : 0;
  }

  get(key: K): V | undefined {
    if (this.many) return this.many.get(key);
    return this.isSole(key) ? this.soleValue : undefined;
  }

  has(key: K): boolean {
    if (this.many) return this.many.has(key);
    return this.isSole(key);
  }

  set(key: K, value: V): this {
    if (this.many) {
      this.many.set(key, value);
    } else if (!this.holdsSole || this.isSole(key)) {
      this.soleKey = key;
      this.soleValue = value;
      this.holdsSole = true;
    } else {
      this.many = new Map<K, V>().set(this.soleKey as K, this.soleValue as V).set(key, value);
      this.forgetSole();
    }
    return this;
  }

  delete(key: K): boolean {
    const many = this.many;
    if (many) {
      if (many.size > 1) return many.delete(key);
      // Its last entry going: the Map is dropped, not emptied (V8 makes a smaller table for a Map a delete empties,
      // and per-client maps that go from one entry to none and back would make one each time).
      if (!many.has(key)) return false;
      this.many = undefined;
      return true;
    }
    if (!this.isSole(key)) return false;
    this.forgetSole();
    return true;
  }

  clear(): void {
    this.many = undefined;
    this.forgetSole();
  }

  forEach(fn: (value: V, key: K, map: ReadonlyMap<K, V>) => void): void {
    for (const [key, value] of this.entries()) fn(value, key, this);
  }

  entries(): MapIterator<[K, V]> {
    return this.many ? this.many.entries() : this.soleEntries();
  }

  keys(): MapIterator<K> {
    return this.many ? this.many.keys() : this.soleKeys();
  }

  values(): MapIterator<V> {
    return this.many ? this.many.values() : this.soleValues();
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }

  private isSole(key: K): boolean {
    const sole = this.soleKey;
    // SameValueZero, as a Map compares keys: NaN equals NaN.
    return this.holdsSole && (sole === key || (sole !== sole && key !== key));
  }

  private forgetSole(): void {
    this.soleKey = undefined;
    this.soleValue = undefined;
    this.holdsSole = false;
  }

  private *soleEntries(): MapIterator<[K, V]> {
    if (this.holdsSole) yield [this.soleKey as K, this.soleValue as V];
  }

  private *soleKeys(): MapIterator<K> {
    if (this.holdsSole) yield this.soleKey as K;
  }

  private *soleValues(): MapIterator<V> {
    if (this.holdsSole) yield this.soleValue as V;
  }
}
