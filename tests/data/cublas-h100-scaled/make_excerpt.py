# Builds tests/data/cublas-h100-scaled from the H100 torch._scaled_mm captures in /work/gpu10/cap4/cap
# (made by /work/gpu10/capture4.py on an NVIDIA H100 80GB HBM3, torch 2.11.0+cu130; read-only).
import json, os, sys, numpy as np
SRC = '/work/gpu10/cap4/cap'
OUT = sys.argv[1]  # tests/data/cublas-h100-scaled
os.makedirs(OUT, exist_ok=True)
# (capture dir, file, (row0, row1, col0, col1) kept or None, why)
PICK = [
    ('rowwise', 'g00000__scaled_mm.npz', None, 'per-row scales ->fp32, slow: product 2661/4096, a_then_b 2721'),
    ('rowwise', 'g00001__scaled_mm.npz', None, 'per-row scales ->fp32, use_fast_accum: product 2720/4096'),
    ('rowwise', 'g00004__scaled_mm.npz', (0, 16, 0, 16), 'per-row ->fp32 128x96x1024, rows/cols 0..15: product 166/256'),
    ('rowwise', 'g00006__scaled_mm.npz', (80, 96, 0, 16), 'per-row ->bf16 128x96x1024, rows 80..95, cols 0..15: product misses D[93, 14]'),
    ('bias', 'g00003__scaled_mm.npz', None, 'per-tensor 0.37 x 1.9 with an fp16 bias ->fp16: product then + C 4096, fused 4095'),
    ('bias-rowwise', 'g00000__scaled_mm.npz', None, 'per-row scales with a bf16 bias ->bf16: b_then_a then + C 4096, fused 4095'),
]
gemms = []
for i, (d, f, keep, why) in enumerate(PICK):
    m = json.load(open(os.path.join(SRC, d, 'manifest.json')))
    g = next(x for x in m['gemms'] if x['file'] == f)
    src = np.load(os.path.join(SRC, d, f))
    z = dict(src)
    sc = g['scales']
    if keep:
        r0, r1, c0, c1 = keep
        z['A'], z['B'], z['D'] = z['A'][r0:r1], z['B'][:, c0:c1], z['D'][r0:r1, c0:c1]
        if 'C' in z:
            z['C'] = z['C'][r0:r1, c0:c1]
        sc['scale_a'], sc['scale_b'] = sc['scale_a'][r0:r1], sc['scale_b'][c0:c1]
        g['m'], g['n'] = r1 - r0, c1 - c0
    # FP8 values are binary16 values: half the bytes
    z['A'], z['B'] = z['A'].astype(np.float16), z['B'].astype(np.float16)
    assert np.all(z['A'].astype(np.float32) == (src['A'][keep[0]:keep[1]] if keep else src['A']))
    name = f'r{i:02d}_{d}_{f}'
    np.savez(os.path.join(OUT, name), **z)
    g.update(file=name, call=i, source=f'cap4/cap/{d}/{f}', why=why)
    gemms.append(g)
man = {'rpsim_gemm_capture': 1, 'torch_version': '2.11.0+cu130', 'model': None, 'calls': len(gemms),
       'gemms': gemms, 'skipped': []}
json.dump(man, open(os.path.join(OUT, 'manifest.json'), 'w'), indent=1)
print(sum(os.path.getsize(os.path.join(OUT, x)) for x in os.listdir(OUT)))
