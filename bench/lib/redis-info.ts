/** CPU seconds redis-server has used so far, from its `INFO cpu` text (getrusage, µs resolution, unlike /proc's 10 ms ticks). */
export function usedCpuSecs(info: string): number {
  const f = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return f('used_cpu_user') + f('used_cpu_sys');
}
