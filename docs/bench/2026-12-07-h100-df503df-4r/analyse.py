import json,glob,statistics as st,sys
d=sys.argv[1]
def load(cfg):
    out=[]
    for f in sorted(glob.glob(f'{d}/{cfg}-r*.json')):
        j=json.load(open(f)); out.append(j[list(j)[0]])
    return out
med=st.median
for cfg in ['pygfx16','pygfx4','pygfx1','ncnn16','ncnn4']:
    R=load(cfg); n=len(R)
    print(f'## {cfg} ({n} rounds)')
    for i in range(3):
        def g(mode,key,r): return r[mode][i][0].get(key)
        rows=[]
        for r in R:
            nl=r['no layer'][i][0]; pk=r['pipekeep (default)'][i][0]
            fl=r['the floor: no pipelines, no layer'][i][0]
            rd=r['the reading: null device, every pipeline'][i][0]['ready_ms']-r['the reading: null device, no pipelines'][i][0]['ready_ms']
            e=r.get('no layer, a cache a pipeline',[None]*3)[i]
            rows.append(dict(nlr=nl['ready_ms'],pkr=pk['ready_ms'],fr=fl['ready_ms'],rd=rd,nle=nl['process_wall_s'],pke=pk['process_wall_s'],fe=fl['process_wall_s'],
              nlc=nl['creation_ms'],pkc=pk['creation_ms'],eac=(e[0]['creation_ms'] if e else None),ear=(e[0].get('ready_ms') if e else None),eae=(e[0]['process_wall_s'] if e else None),
              kept=pk['kept_bytes'],drv=nl['driver_cache_bytes'],w=pk['watch'],store=pk['store_bytes']))
        F=med([x['fr'] for x in rows]); FE=med([x['fe'] for x in rows]); RD=med([x['rd'] for x in rows])
        r_ready=med([x['pkr']/x['nlr'] for x in rows])
        r_lf=med([(x['pkr']-x['fr'])/(x['nlr']-x['fr']) for x in rows])
        r_lfr=med([(x['pkr']-x['fr']-x['rd'])/(x['nlr']-x['fr']-x['rd']) for x in rows])
        r_end=med([x['pke']/x['nle'] for x in rows])
        r_endlf=med([(x['pke']-x['fe'])/(x['nle']-x['fe']) for x in rows])
        r_c=med([x['pkc']/x['nlc'] for x in rows])
        print(f' L{i+1}: ready {med([x["pkr"] for x in rows]):.0f} ({r_ready:.3f}x; {r_lf:.3f}x; {r_lfr:.3f}x) | end {med([x["pke"] for x in rows]):.2f} ({r_end:.3f}x; {r_endlf:.3f}x) | creation {med([x["pkc"] for x in rows]):.0f} ({r_c:.3f}x) | NL ready {med([x["nlr"] for x in rows]):.0f} [{min(x["nlr"] for x in rows)}-{max(x["nlr"] for x in rows)}] end {med([x["nle"] for x in rows]):.2f} | floor {F:.0f} reading {RD:.0f}')
        print('    per round ready ratios', ' '.join(f'{x["pkr"]/x["nlr"]:.3f}' for x in rows), ' end', ' '.join(f'{x["pke"]/x["nle"]:.3f}' for x in rows), ' found', [x['w'].get('found') for x in rows], 'end_ms',[x['w'].get('end_ms') for x in rows], 'left', [x['w'].get('end_left_waiting') for x in rows])
        if rows[0]['eac']:
            print('    a cache a pipeline (no layer): creation ratio', ' '.join(f'{x["eac"]/x["nlc"]:.3f}' for x in rows), 'median %.3f'%med([x["eac"]/x["nlc"] for x in rows]), ' ready', ' '.join(f'{(x["ear"] or 0)/x["nlr"]:.3f}' for x in rows), ' end', 'median %.3f'%med([x["eae"]/x["nle"] for x in rows]))
        if i==2: print('    bytes kept', [x['kept'] for x in rows], 'driver', [x['drv'] for x in rows], 'ratio', ' '.join(f'{x["kept"]/x["drv"]:.4f}' for x in rows), 'store(all)', [x['store'] for x in rows])
