"""The reranker resource: recall's cross-encoder and the merge-agreement hook, both absent without weights."""


from memory_assets.resources import RerankerResource


def test_no_weights_no_reranker_and_no_agreement(tmp_path):
    assert RerankerResource(path=str(tmp_path)).reranker() is None
    assert RerankerResource(enabled=True, path=str(tmp_path)).agreement() is None


def test_with_weights_agreement_is_a_threshold_on_the_cross_encoders_score(cross_encoder_dir):
    resource = RerankerResource(path=str(cross_encoder_dir))
    scorer = resource.reranker()
    assert scorer is not None and resource.agreement() is None  # weights alone do not switch merges over
    a, b = "Staging requires TLS.", "TLS is required on staging."
    score = scorer(a, [b])[0]
    assert 0 <= score <= 1
    assert RerankerResource(enabled=True, path=str(cross_encoder_dir), agreement_min=score - 1e-3).agreement()(a, b)
    assert not RerankerResource(enabled=True, path=str(cross_encoder_dir), agreement_min=score + 1e-3).agreement()(a, b)
