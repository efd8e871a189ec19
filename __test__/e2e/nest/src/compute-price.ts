// The CPU route's work: `ms` milliseconds of synchronous arithmetic on the event loop, so that a
// profiler sees this function (and the requests it holds up wait for it).
export function computePrice(sku: string, ms: number): number {
  const end = performance.now() + ms;
  let price = sku.length;
  while (performance.now() < end) {
    for (let i = 1; i < 1000; i++) price = (price * 31 + Math.sqrt(i)) % 1_000_003;
  }
  return Math.round(price) / 100;
}
