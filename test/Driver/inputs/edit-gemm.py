"""Damages the first library GEMM record of a bundle: edit-gemm.py IN OUT
FIELD VALUE sets gemm.a.FIELD (order, arg) or gemm.FIELD (compute, path)."""
import json
import sys

source, target, field, value = sys.argv[1:5]
bundle = json.load(open(source))
record = next(launch['gemm']
              for program in bundle['programs'].values()
              for group in program.get('groups', [])
              for launch in group['launches']
              if launch.get('gemm', {}).get('path') == 'cublaslt')
if field == 'arg':
    record['a']['arg'] = int(value)
elif field == 'order':
    record['a']['order'] = value
else:
    record[field] = value
json.dump(bundle, open(target, 'w'))
