# Builds tests/data/cublas-h200 from the H200 captures in /work/gpu9 (read-only).
import json, os, sys, numpy as np
SRC = '/work/gpu9'
OUT = sys.argv[1]  # tests/data/cublas-h200
os.makedirs(OUT, exist_ok=True)
# (capture dir, file, rows/cols kept or None, use_fast_accum as called, why)
PICK = [
    ('cap2/tf32-grid', 'g00004_mm.npz', None, None, 'tf32 K=344 (not a multiple of 32): 22 slices of 16'),
    ('cap2/tf32-grid', 'g00010_mm.npz', None, None, 'tf32 128x128x128: one chain (the old guess split 8)'),
    ('cap2/fp16-grid', 'g00003_mm.npz', 16, None, 'fp16 K=4096: split-K 3 (rows/cols 0..15 of 64x64)'),
    ('cap2/bf16-grid', 'g00003_mm.npz', 8, None, 'bf16 K=4096: split-K 3 (rows/cols 0..7 of 64x64)'),
    ('cap2/fast-k-one', 'g00015__scaled_mm.npz', None, True, 'use_fast_accum=True K=512 ->fp32: one 13-bit chain'),
    ('cap2/slow-k-scaled', 'g00010__scaled_mm.npz', None, False, 'use_fast_accum=False, scales 3.3 x 0.011, ->fp32'),
    ('cap2/mixed', 'g00022__scaled_mm.npz', None, False, 'e4m3 x e5m2, scales 0.37 x 1.9, ->fp32, slow'),
    ('cap2/mixed', 'g00027__scaled_mm.npz', None, True, 'e5m2 x e4m3 ->fp32, fast'),
    ('cap/gpt-fp16', 'g00013_mm.npz', None, None, 'real GPT step, fp16 autocast'),
    ('cap/llama-bf16', 'g00000_mm.npz', None, None, 'real LLaMA-style step, bf16 autocast'),
]
gemms = []
for i, (d, f, keep, fast, why) in enumerate(PICK):
    m = json.load(open(os.path.join(SRC, d, 'manifest.json')))
    g = next(x for x in m['gemms'] if x['file'] == f)
    z = dict(np.load(os.path.join(SRC, d, f)))
    if keep:
        z['A'], z['B'], z['D'] = z['A'][:keep], z['B'][:, :keep], z['D'][:keep, :keep]
        g['m'], g['n'] = keep, keep
    if g['op'] == '_scaled_mm':  # FP8 values are binary16 values: half the bytes
        z['A'], z['B'] = z['A'].astype(np.float16), z['B'].astype(np.float16)
        assert np.all(z['A'].astype(np.float32) == np.load(os.path.join(SRC, d, f))['A'][:z['A'].shape[0]])
    if fast is not None:
        g['use_fast_accum'] = fast
    name = f'h{i:02d}_{f}'
    np.savez(os.path.join(OUT, name), **z)
    g.update(file=name, call=i, source=f'{d}/{f}', why=why)
    gemms.append(g)
man = {'rpsim_gemm_capture': 1, 'torch_version': '2.11.0+cu130', 'model': None, 'calls': len(gemms),
       'gemms': gemms, 'skipped': []}
json.dump(man, open(os.path.join(OUT, 'manifest.json'), 'w'), indent=1)
print(sum(os.path.getsize(os.path.join(OUT, x)) for x in os.listdir(OUT)))
