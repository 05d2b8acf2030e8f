# An OffsetCommit request laid flat for the offsets' hot path (kcoord._core._offsets): _wire's offset_commit_flat
# fills these from the decoded message, whose fields only _wire reads as struct fields (elsewhere each is a Python
# attribute lookup). Every object pointer is borrowed from the request, which the caller holds meanwhile.

from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t


cdef struct CommitHead:
    PyObject* group_id
    PyObject* member_id
    PyObject* instance_id  # group_instance_id: str or None
    PyObject* topics  # the request's topic list
    int32_t generation  # generation_id_or_member_epoch


cdef struct CommitPart:
    PyObject* name  # its topic's name, as the request has it
    PyObject* topic_id  # its topic's id, as the request has it
    PyObject* metadata  # committed_metadata: str or None
    int64_t offset
    int32_t partition
    int32_t leader_epoch
