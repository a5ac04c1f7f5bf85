"""The VectorStore contract suite, for test modules of stores on real engines.

The contract tests live in ``tests/unit/test_rag_stores.py`` (run there over the built-in stores).
A store's own test module imports them from here and defines two fixtures the tests ask for:
``make_store`` (a factory of empty stores built with ``contract_model()``) and ``store`` (one store
holding ``DOCS``); pytest then runs every contract test against that store.
"""

from __future__ import annotations

from chatclient.rag import HashingEmbeddingModel
from tests.unit.test_rag_stores import (
    DOCS,
    test_add_replaces_same_id,
    test_async_variants,
    test_concurrent_adds_lose_nothing,
    test_delete_bad_arguments,
    test_delete_by_filter_text_and_expression,
    test_delete_by_ids_ignores_unknown,
    test_dimension_change_is_rejected,
    test_empty_store_and_delete_everything,
    test_filter_with_threshold_and_top_k,
    test_filters_restrict_results,
    test_is_a_vector_store,
    test_plain_text_query_uses_default_top_k,
    test_search_returns_scored_documents_best_first,
    test_threshold_keeps_only_scores_at_or_above,
    test_top_k_zero_and_larger_than_store,
)


def contract_model() -> HashingEmbeddingModel:
    """The embedding model the contract suite's expectations were written for."""
    return HashingEmbeddingModel(dimensions=512, char_ngrams=True)


CONTRACT_TESTS = (
    test_add_replaces_same_id,
    test_async_variants,
    test_concurrent_adds_lose_nothing,
    test_delete_bad_arguments,
    test_delete_by_filter_text_and_expression,
    test_delete_by_ids_ignores_unknown,
    test_dimension_change_is_rejected,
    test_empty_store_and_delete_everything,
    test_filter_with_threshold_and_top_k,
    test_filters_restrict_results,
    test_is_a_vector_store,
    test_plain_text_query_uses_default_top_k,
    test_search_returns_scored_documents_best_first,
    test_threshold_keeps_only_scores_at_or_above,
    test_top_k_zero_and_larger_than_store,
)

__all__ = ["CONTRACT_TESTS", "DOCS", "contract_model", *(t.__name__ for t in CONTRACT_TESTS)]
