"""TorchRec (its public modules and sparse types) on tpu against CPU:
EmbeddingBagCollection with a KeyedJaggedTensor, forward and backward
(pooled SUM and MEAN, weighted, variable batch per feature), and the
KeyedJaggedTensor / JaggedTensor / KeyedTensor operations that run FBGEMM
ops, which torch_tpu implements for tpu (torch_tpu/integrations/fbgemm.py).
No CPU fallback: an op without a tpu kernel raises."""

import pytest
import torch

torchrec = pytest.importorskip("torchrec")

from torchrec.modules.embedding_configs import (  # noqa: E402
    EmbeddingBagConfig, EmbeddingConfig, PoolingType,
)
from torchrec.modules.embedding_modules import (  # noqa: E402
    EmbeddingBagCollection, EmbeddingCollection,
)
from torchrec.sparse.jagged_tensor import JaggedTensor, KeyedJaggedTensor, KeyedTensor  # noqa: E402

import torch_tpu  # noqa: E402

KEYS = ["f1", "f2", "f3"]


def _data(seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 4, (3 * 4,), generator=g)  # 3 features x batch 4
    values = torch.randint(0, 50, (int(lengths.sum()),), generator=g)
    weights = torch.rand(int(lengths.sum()), generator=g)
    return lengths, values, weights


def _kjt(device, data, weighted=False):
    lengths, values, weights = data
    return KeyedJaggedTensor.from_lengths_sync(
        keys=KEYS, values=values.to(device), lengths=lengths.to(device),
        weights=weights.to(device) if weighted else None)


def _tables(second_pooling):
    return [EmbeddingBagConfig(name="t1", embedding_dim=8, num_embeddings=50, feature_names=["f1"],
                               pooling=PoolingType.SUM),
            EmbeddingBagConfig(name="t2", embedding_dim=8, num_embeddings=50,
                               feature_names=["f2", "f3"], pooling=second_pooling)]


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        x = list(x.values())
    return [t for y in x for t in _flat(y)]


def _compare(case, data):
    expected = [t.detach() for t in _flat(case("cpu", data))]
    with torch_tpu.cpu_fallback_mode(False):
        actual = _flat(case("tpu", data))
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.device.type == "tpu", i
        torch.testing.assert_close(a.detach().cpu(), e, rtol=1e-5, atol=1e-5, msg=f"output {i}")


def _ebc_train(device, data, weighted=False, build_on=None, kjt=None):
    torch.manual_seed(0)
    pooling = PoolingType.SUM if weighted else PoolingType.MEAN
    m = EmbeddingBagCollection(tables=_tables(pooling), is_weighted=weighted,
                               device=torch.device(build_on or "cpu"))
    if build_on is None:
        m = m.to(device)
    else:  # built on the device: the same weights as CPU's
        with torch.no_grad():
            for p, q in zip(m.parameters(), _ebc_train.cpu_weights):
                p.copy_(q)
    keyed = m(kjt(device, data) if kjt else _kjt(device, data, weighted))
    per_key = keyed.to_dict()
    (keyed.values().pow(2).sum() + per_key["f3"].sum()).backward()
    return [keyed.values(), per_key] + [p.grad for p in m.parameters()]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_bag_collection_forward_backward(seed, weighted):
    _compare(lambda dev, data: _ebc_train(dev, data, weighted), _data(seed))


def test_embedding_bag_collection_built_on_tpu():
    torch.manual_seed(0)
    _ebc_train.cpu_weights = [p.detach().clone() for p in EmbeddingBagCollection(
        tables=_tables(PoolingType.MEAN), device=torch.device("cpu")).parameters()]
    _compare(lambda dev, data: _ebc_train(dev, data, build_on=dev), _data(3))


def test_embedding_bag_collection_variable_batch_per_feature():
    def kjt(device, data):
        return KeyedJaggedTensor(
            keys=KEYS, values=torch.arange(9, device=device) * 5,
            lengths=torch.tensor([2, 0, 1, 1, 3, 1, 0, 1], device=device),
            stride_per_key_per_rank=[[3], [2], [3]],
            inverse_indices=(KEYS, torch.tensor([[0, 1, 2], [0, 1, 1], [0, 1, 2]], device=device)))

    _compare(lambda dev, data: _ebc_train(dev, data, kjt=kjt), None)


def test_embedding_collection_forward_backward():
    def case(device, data):
        torch.manual_seed(0)
        m = EmbeddingCollection(tables=[EmbeddingConfig(
            name="t", embedding_dim=8, num_embeddings=50, feature_names=KEYS)]).to(device)
        out = m(_kjt(device, data))
        sum(jt.values().pow(2).sum() for jt in out.values()).backward()
        return [out["f2"].values()] + [p.grad for p in m.parameters()]

    _compare(case, _data(4))


@pytest.mark.parametrize("weighted", [False, True])
def test_keyed_jagged_tensor_operations(weighted):
    def case(device, data):
        k = _kjt(device, data, weighted)
        permuted = k.permute([2, 0, 1])
        first, rest = k.split([1, 2])
        joined = KeyedJaggedTensor.concat([rest, first])
        out = [k.offsets(), k.lengths(), torch.tensor(k.length_per_key(), device=device),
               permuted.values(), permuted.lengths(), k["f2"].values(), k["f2"].offsets(),
               rest.offsets(), joined.values(), joined.lengths()]
        if weighted:
            out.append(permuted.weights())
        return out

    _compare(case, _data(5))


def test_keyed_jagged_tensor_permute_variable_batch():
    def case(device, data):
        k = KeyedJaggedTensor(keys=KEYS, values=torch.arange(9, device=device),
                              lengths=torch.tensor([2, 0, 1, 1, 3, 1, 0, 1], device=device),
                              stride_per_key_per_rank=[[3], [2], [3]])
        p = k.permute([2, 0, 1])
        return [p.values(), p.lengths(), torch.tensor(k.length_per_key(), device=device)]

    _compare(case, None)


def test_keyed_tensor_regroup_backward():
    def case(device, data):
        torch.manual_seed(0)
        m = EmbeddingBagCollection(tables=_tables(PoolingType.MEAN)).to(device)
        keyed = m(_kjt(device, data))
        groups = KeyedTensor.regroup([keyed], [["f3", "f1"], ["f2"]])
        as_dict = KeyedTensor.regroup_as_dict([keyed], [["f3", "f1"], ["f2"]], ["a", "b"])
        (groups[0] * torch.arange(groups[0].shape[1], device=device)).sum().backward()
        return groups + list(as_dict.values()) + [p.grad for p in m.parameters()]

    _compare(case, _data(6))


def test_jagged_tensor_dense_round_trips():
    def case(device, data):
        v = (torch.arange(1.0, 8.0).reshape(7, 1) * torch.tensor([1.0, -2.0])).to(device)
        v.requires_grad_()
        jt = JaggedTensor(values=v, lengths=torch.tensor([2, 0, 4, 1], device=device))
        padded = jt.to_padded_dense(desired_length=3, padding_value=-1.0)  # cuts the 4
        (padded * torch.arange(padded.numel(), device=device).reshape(padded.shape)).sum().backward()
        dense = JaggedTensor.from_dense([torch.tensor([1.0, 2.0], device=device),
                                         torch.tensor([3.0], device=device)])
        return [padded, v.grad, dense.values(), dense.offsets(), jt.to_dense()[2]]

    _compare(case, None)


def test_fbgemm_cumsums_and_segment_sum():
    def case(device, data):
        t = torch.tensor([3, 0, 2, 5, 1], device=device)
        values = torch.arange(12.0, device=device)
        return [torch.ops.fbgemm.asynchronous_complete_cumsum(t),
                torch.ops.fbgemm.asynchronous_exclusive_cumsum(t),
                torch.ops.fbgemm.asynchronous_inclusive_cumsum(t),
                torch.ops.fbgemm.asynchronous_complete_cumsum(t.reshape(1, 5)),
                torch.ops.fbgemm.segment_sum_csr(2, torch.tensor([0, 1, 4, 5], device=device),
                                                 values)]

    _compare(case, None)
