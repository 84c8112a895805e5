# The driver's own floor of a later launch in one tool: pipekeep replay with no layer (the
# driver's disk cache, an in-memory cache a run of 1,024, as Valve's) against the same tool
# building each pipeline through a cache of its own made of the data it kept (no layer, a cache
# a pipeline): each round's wall of the pipelines' phase, and creation summed.
import json, glob, statistics as st, sys
d = sys.argv[1]
for cfg in sys.argv[2:] or ['ncnn4']:
    for i in range(3):
        rows = []
        for f in sorted(glob.glob(f'{d}/{cfg}-r*.json')):
            j = json.load(open(f)); r = j[list(j)[0]]
            own = r.get('no layer, pipekeep replay'); each = r.get('no layer, a cache a pipeline')
            if not own or not each:
                continue
            o, e = own[i][0], each[i][0]
            rows.append((e['wall_ms'] / o['wall_ms'], e['creation_ms'] / o['creation_ms'], o['wall_ms'], e['wall_ms']))
        if rows:
            print(f'{cfg} L{i+1}: a cache a pipeline / pipekeep replay, wall', ' '.join(f'{x[0]:.3f}' for x in rows),
                  'median %.3f' % st.median(x[0] for x in rows), '| creation', ' '.join(f'{x[1]:.3f}' for x in rows),
                  '| walls ms', [(round(x[2]), round(x[3])) for x in rows])
