"""Student-cell source that more than one sandbox test module runs in its workers."""

# What a connection made from inside the sandbox gets: "connected", or the name of the
# error that stopped it. Without ``timeout`` the socket blocks, as a plain socket does.
CONNECT_OUTCOME = '''
import socket

def connect_outcome(family, address, timeout=None):
    s = socket.socket(family, socket.SOCK_STREAM)
    if timeout is not None:
        s.settimeout(timeout)
    try:
        s.connect(address)
        return "connected"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
'''
