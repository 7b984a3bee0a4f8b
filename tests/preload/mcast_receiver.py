# An unmodified multicast receiver (the way feed handlers are written): bind the port, join the
# group on an interface address with IP_ADD_MEMBERSHIP, count what arrives until a quiet 3 s.
import socket
import struct
import sys

group, port, count, ifaddr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", port))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
             struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton(ifaddr)))
print("joined", flush=True)
s.settimeout(3)
seen = set()
n = 0
try:
    while n < count:
        data, _ = s.recvfrom(2048)
        seen.add(data)
        n += 1
except socket.timeout:
    pass
print("received", n, "distinct", len(seen), flush=True)
s.close()
